/* SPDX-License-Identifier: Apache-2.0
 * dnsstub.c - the transparent mode's DNS stub and its address table.
 *
 * DOC: Theory of Operation
 *
 * In transparent mode the sandbox's resolv.conf names this stub, and
 * every TCP connection that leaves the sandbox's loopback is redirected
 * to the proxy (transparent.c). The stub never forwards a query: the
 * agent's DNS reaches no server, so DNS cannot carry data out, and the
 * name that a program wanted reaches the proxy as the address it was
 * given. For an A query the stub hands out a synthetic address that
 * stands for the name for the whole session; the proxy reads the
 * original destination of a redirected connection, looks the address up
 * here, and decides the name exactly as a CONNECT. AAAA has no answer
 * (so programs use IPv4 and the synthetic address); other types have no
 * answer either. In enforce mode a name that no rule could allow on any
 * port gets NXDOMAIN (the program fails as for a name that does not
 * exist), and the caller records it once.
 *
 * The query is untrusted. It is parsed strictly: a 12-byte header, one
 * question whose name is plain labels (no compression pointer, at most
 * 255 bytes on the wire), at most one additional record which must be an
 * EDNS OPT with well-formed options, and nothing after it. The name is
 * then normalised as the proxy normalises a target (hostname.c): a name
 * the proxy would refuse, or an IP address written as a name, is
 * NXDOMAIN in every mode, since no synthetic address could stand for it.
 *
 * The table lives in a memfd shared by the writer (the stub, in the
 * supervisor) and its readers (the proxy's workers, other processes).
 * Entries are append-only and never reused: an address means one name
 * for the whole session, however long a program caches it. The writer
 * fills an entry and then publishes it by storing the new count with
 * release order; a reader loads the count with acquire order and reads
 * only entries below it, so it sees complete entries or none. The memfd
 * is sealed (no shrinking, growing or new writable mappings) as soon as
 * it is made, so a reader can neither corrupt the writer's view nor
 * make it fault, and the stub's index of names is private memory, which
 * no reader can reach. A full table answers SERVFAIL for new names:
 * reusing an address would let a cached answer reach another name.
 *
 * Should: answer A with the name's synthetic address, AAAA and others
 * with NOERROR and no data, refuse what does not parse. Mustn't: send a
 * packet anywhere, hand one address to two names, read past the
 * datagram, trust the table's count beyond its capacity.
 */
#include "dnsstub.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* ------------------------------------------------------------------ */
/* The shared table                                                   */
/* ------------------------------------------------------------------ */

#define TABLE_MAGIC 0x7473736e64726961ull /* "airdnsst" little-endian */
#define TABLE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE)

struct shared_header {
	uint64_t magic;
	uint32_t capacity;
	_Atomic uint32_t count; /* entries below it are complete */
	uint8_t pad[48];
};

struct shared_entry {
	uint8_t len;                 /* 1..HOSTNAME_MAX */
	char name[HOSTNAME_MAX + 2]; /* NUL-terminated */
};

static_assert(sizeof(struct shared_header) == 64, "header is one cache line");
static_assert(sizeof(struct shared_entry) == 256, "entries are 256 bytes");
static_assert(ATOMIC_INT_LOCK_FREE == 2,
	      "the count is shared across processes: it must be lock-free");
static_assert(DNSSTUB_TABLE_MAX < 0xffffu,
	      "the synthetic range is 240.0.0.0/16");

struct dnsstub_table {
	int fd;             /* the memfd; -1 in a reader made from a child */
	bool writer;
	uint32_t capacity;
	size_t size;
	void *map;
	struct shared_header *hdr;
	struct shared_entry *ent;
};

static size_t table_size(uint32_t capacity)
{
	return sizeof(struct shared_header) +
	       (size_t)capacity * sizeof(struct shared_entry);
}

static void table_bind(struct dnsstub_table *t, void *map)
{
	t->map = map;
	t->hdr = map;
	t->ent = (struct shared_entry *)((char *)map + sizeof(struct shared_header));
}

int dnsstub_table_new(uint32_t capacity, struct dnsstub_table **out)
{
	struct dnsstub_table *t = NULL;
	void *map = MAP_FAILED;
	size_t size;
	int fd = -1, rc;

	*out = NULL;
	if (capacity < 1 || capacity > DNSSTUB_TABLE_MAX)
		return -EINVAL;
	size = table_size(capacity);
	fd = memfd_create("airlock-dnsstub", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	/* From here on no one can resize the file or map it writable: the
	 * mapping above stays the only writable one. */
	if (fcntl(fd, F_ADD_SEALS, TABLE_SEALS | F_SEAL_SEAL) < 0) {
		rc = -errno;
		goto out;
	}
	t = util_xcalloc(1, sizeof(*t));
	t->fd = fd;
	t->writer = true;
	t->capacity = capacity;
	t->size = size;
	table_bind(t, map);
	t->hdr->magic = TABLE_MAGIC;
	t->hdr->capacity = capacity;
	atomic_store_explicit(&t->hdr->count, 0, memory_order_release);
	*out = t;
	fd = -1;
	map = MAP_FAILED;
	rc = 0;
out:
	if (map != MAP_FAILED)
		munmap(map, size);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Maps @fd read-only after checking that it is a sealed table; *capacity
 * and *size describe it. Returns the mapping or MAP_FAILED with errno. */
static void *map_reader(int fd, uint32_t *capacity, size_t *size)
{
	const struct shared_header *h;
	struct stat st;
	void *map;
	int seals;

	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & TABLE_SEALS) != TABLE_SEALS ||
	    fstat(fd, &st) < 0 || st.st_size < (off_t)table_size(1) ||
	    st.st_size > (off_t)table_size(DNSSTUB_TABLE_MAX)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return MAP_FAILED;
	h = map;
	if (h->magic != TABLE_MAGIC || h->capacity < 1 ||
	    h->capacity > DNSSTUB_TABLE_MAX ||
	    table_size(h->capacity) != (size_t)st.st_size) {
		munmap(map, (size_t)st.st_size);
		errno = EINVAL;
		return MAP_FAILED;
	}
	*capacity = h->capacity;
	*size = (size_t)st.st_size;
	return map;
}

int dnsstub_table_make_reader(struct dnsstub_table *t)
{
	uint32_t capacity;
	size_t size;
	void *map;

	if (!t->writer || t->fd < 0)
		return -EINVAL;
	map = map_reader(t->fd, &capacity, &size);
	if (map == MAP_FAILED)
		return -errno;
	munmap(t->map, t->size);
	table_bind(t, map);
	t->capacity = capacity;
	t->size = size;
	t->writer = false;
	close(t->fd);
	t->fd = -1;
	return 0;
}

int dnsstub_table_open(int fd, struct dnsstub_table **out)
{
	struct dnsstub_table *t;
	uint32_t capacity;
	size_t size;
	void *map;

	*out = NULL;
	map = map_reader(fd, &capacity, &size);
	if (map == MAP_FAILED)
		return -errno;
	t = util_xcalloc(1, sizeof(*t));
	t->fd = -1;
	t->capacity = capacity;
	t->size = size;
	table_bind(t, map);
	*out = t;
	return 0;
}

int dnsstub_table_fd(const struct dnsstub_table *t)
{
	return t->fd;
}

void dnsstub_table_free(struct dnsstub_table *t)
{
	if (!t)
		return;
	munmap(t->map, t->size);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

/* The count, never more than this process's idea of the capacity. */
static uint32_t table_count(const struct dnsstub_table *t)
{
	uint32_t n = atomic_load_explicit(&t->hdr->count, memory_order_acquire);

	return n < t->capacity ? n : t->capacity;
}

uint32_t dnsstub_table_count(const struct dnsstub_table *t)
{
	return table_count(t);
}

uint32_t dnsstub_table_capacity(const struct dnsstub_table *t)
{
	return t->capacity;
}

static void index_addr(uint32_t index, struct addr *a)
{
	uint32_t v = DNSSTUB_ADDR_FIRST + index;

	memset(a, 0, sizeof(*a));
	a->family = AF_INET;
	a->bytes[0] = (uint8_t)(v >> 24);
	a->bytes[1] = (uint8_t)(v >> 16);
	a->bytes[2] = (uint8_t)(v >> 8);
	a->bytes[3] = (uint8_t)v;
}

int dnsstub_table_add(struct dnsstub_table *t, const char *name,
		      struct addr *out)
{
	size_t len = strlen(name);
	struct shared_entry *e;
	uint32_t n;

	ASSERT(len >= 1 && len <= HOSTNAME_MAX);
	if (!t->writer)
		return -EROFS;
	/* One writer: nobody else changes the count. */
	n = atomic_load_explicit(&t->hdr->count, memory_order_relaxed);
	if (n >= t->capacity)
		return -ENOSPC;
	e = &t->ent[n];
	memcpy(e->name, name, len + 1);
	e->len = (uint8_t)len;
	atomic_store_explicit(&t->hdr->count, n + 1, memory_order_release);
	index_addr(n, out);
	return 0;
}

/* The IPv4 address in @a (AF_INET, or IPv4-mapped AF_INET6) as a host
 * order integer; false for anything else. */
static bool ipv4_of(const struct addr *a, uint32_t *v)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const uint8_t *b;

	if (a->family == AF_INET)
		b = a->bytes;
	else if (a->family == AF_INET6 && memcmp(a->bytes, mapped, 12) == 0)
		b = a->bytes + 12;
	else
		return false;
	*v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
	return true;
}

bool dnsstub_addr_is_synthetic(const struct addr *a)
{
	uint32_t v;

	return ipv4_of(a, &v) && (v >> 16) == (DNSSTUB_ADDR_FIRST >> 16);
}

bool dnsstub_table_lookup_addr(const struct dnsstub_table *t,
			       const struct addr *a,
			       char name[HOSTNAME_MAX + 1])
{
	const struct shared_entry *e;
	uint32_t v, index;
	size_t len;

	name[0] = '\0';
	if (!ipv4_of(a, &v) || v < DNSSTUB_ADDR_FIRST)
		return false;
	index = v - DNSSTUB_ADDR_FIRST;
	if (index >= table_count(t))
		return false;
	e = &t->ent[index];
	len = e->len;
	/* The writer is trusted, but a reader copies only what fits. */
	if (len < 1 || len > HOSTNAME_MAX)
		return false;
	memcpy(name, e->name, len);
	name[len] = '\0';
	return strlen(name) == len;
}

/* ------------------------------------------------------------------ */
/* The query                                                          */
/* ------------------------------------------------------------------ */

#define DNS_HEADER 12
#define FLAG_QR 0x8000u
#define FLAG_OPCODE 0x7800u
#define FLAG_AA 0x0400u
#define FLAG_TC 0x0200u
#define FLAG_RD 0x0100u
#define FLAG_RA 0x0080u
#define RCODE_NOERROR 0
#define RCODE_FORMERR 1
#define RCODE_SERVFAIL 2
#define RCODE_NXDOMAIN 3
#define RCODE_NOTIMP 4
#define RCODE_REFUSED 5
#define TYPE_A 1
#define TYPE_OPT 41
#define TYPE_TKEY 249
#define TYPE_TSIG 250
#define CLASS_IN 1

struct query {
	uint16_t id;
	uint16_t flags;
	uint16_t qtype;
	uint16_t qclass;
	size_t qend;      /* the question is bytes [DNS_HEADER, qend) */
	bool has_question;
	bool text_ok;     /* every label byte is one a name may hold */
	char text[HOSTNAME_MAX + 2]; /* the name as dotted text, if text_ok */
	size_t textlen;
	char display[DNSSTUB_DISPLAY_MAX];
	size_t displen;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static bool name_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_';
}

/* Appends one label byte to the display and text forms. The display form
 * has room for every name a 255-byte wire name can hold (ASSERTed). */
static void add_byte(struct query *qr, uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		c = (uint8_t)(c - 'A' + 'a');
	if (name_byte(c)) {
		ASSERT(qr->displen + 1 < sizeof(qr->display));
		qr->display[qr->displen++] = (char)c;
	} else {
		ASSERT(qr->displen + 4 < sizeof(qr->display));
		snprintf(qr->display + qr->displen, 5, "\\%03u", c);
		qr->displen += 4;
		qr->text_ok = false;
	}
	if (qr->text_ok) {
		ASSERT(qr->textlen + 1 < sizeof(qr->text));
		qr->text[qr->textlen++] = (char)c;
	}
}

static void add_dot(struct query *qr)
{
	ASSERT(qr->displen + 1 < sizeof(qr->display) &&
	       qr->textlen + 1 < sizeof(qr->text));
	qr->display[qr->displen++] = '.';
	qr->text[qr->textlen++] = '.';
}

/* The question's name at q[*pos]: plain labels only, at most 255 bytes on
 * the wire, inside @len. Advances *pos past it. */
static bool parse_name(const uint8_t *q, size_t len, size_t *pos,
		       struct query *qr)
{
	size_t p = *pos, wire = 0;
	bool first = true;

	qr->text_ok = true;
	for (;;) {
		size_t l, i;

		if (p >= len)
			return false;
		l = q[p++];
		/* 0xc0 is a compression pointer, 0x40 and 0x80 are obsolete
		 * or unassigned label types: none belongs in a question. */
		if (l & 0xc0)
			return false;
		wire += l + 1;
		if (wire > 255)
			return false;
		if (l == 0)
			break;
		if (l > len - p)
			return false;
		if (!first)
			add_dot(qr);
		first = false;
		for (i = 0; i < l; i++)
			add_byte(qr, q[p + i]);
		p += l;
	}
	if (first) {
		qr->display[qr->displen++] = '.';
		qr->text_ok = false; /* the root is no host */
	}
	qr->display[qr->displen] = '\0';
	qr->text[qr->textlen] = '\0';
	*pos = p;
	return true;
}

/* An EDNS OPT record at q[*pos]: owner the root, type OPT, its options
 * framed exactly inside RDLEN. Its content is ignored. */
static bool parse_opt(const uint8_t *q, size_t len, size_t *pos)
{
	size_t p = *pos, rdlen, end;

	if (len - p < 11 || q[p] != 0 || get16(q + p + 1) != TYPE_OPT)
		return false;
	rdlen = get16(q + p + 9);
	p += 11;
	if (rdlen > len - p)
		return false;
	end = p + rdlen;
	while (p < end) {
		size_t olen;

		if (end - p < 4)
			return false;
		olen = get16(q + p + 2);
		p += 4;
		if (olen > end - p)
			return false;
		p += olen;
	}
	*pos = p;
	return true;
}

/* Parses the datagram. Returns true for one well-formed question in
 * class IN; else false and *fail says how to answer (qr->has_question
 * tells whether the question can be echoed). */
static bool parse_query(const uint8_t *q, size_t len, struct query *qr,
			enum dnsstub_outcome *fail)
{
	size_t pos = DNS_HEADER;
	uint16_t qd, an, ns, ar, opcode;

	memset(qr, 0, sizeof(*qr));
	if (len < DNS_HEADER) {
		*fail = DNSSTUB_DROP;
		return false;
	}
	qr->id = get16(q);
	qr->flags = get16(q + 2);
	/* Never answer an answer: two stubs could ping-pong forever. */
	if (qr->flags & FLAG_QR) {
		*fail = DNSSTUB_DROP;
		return false;
	}
	opcode = (uint16_t)((qr->flags & FLAG_OPCODE) >> 11);
	qd = get16(q + 4);
	an = get16(q + 6);
	ns = get16(q + 8);
	ar = get16(q + 10);
	*fail = DNSSTUB_FORMERR;
	if (len > DNSSTUB_QUERY_MAX)
		return false;
	if (opcode != 0) {
		*fail = DNSSTUB_NOTIMP;
		return false;
	}
	if ((qr->flags & FLAG_TC) || qd != 1 || an != 0 || ns != 0 || ar > 1)
		return false;
	if (!parse_name(q, len, &pos, qr) || len - pos < 4)
		return false;
	qr->qtype = get16(q + pos);
	qr->qclass = get16(q + pos + 2);
	pos += 4;
	qr->qend = pos;
	if (ar == 1 && !parse_opt(q, len, &pos))
		return false;
	if (pos != len)
		return false;
	if (qr->qtype == TYPE_OPT || qr->qtype == TYPE_TKEY || qr->qtype == TYPE_TSIG)
		return false;
	qr->has_question = true;
	if (qr->qclass != CLASS_IN) {
		*fail = DNSSTUB_REFUSED;
		return false;
	}
	return true;
}

/* Writes the response: the header, the question when @with_question,
 * one A record for @a when not NULL. */
static size_t build(uint8_t *out, const uint8_t *q, const struct query *qr,
		    bool with_question, unsigned int rcode,
		    const struct addr *a)
{
	size_t n = DNS_HEADER;
	uint16_t flags;

	flags = (uint16_t)(FLAG_QR | (qr->flags & FLAG_OPCODE) | FLAG_AA |
			   (qr->flags & FLAG_RD) | FLAG_RA | rcode);
	put16(out, qr->id);
	put16(out + 2, flags);
	put16(out + 4, with_question ? 1 : 0);
	put16(out + 6, a ? 1 : 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	if (with_question) {
		size_t qlen = qr->qend - DNS_HEADER;

		ASSERT(qlen <= 255 + 4);
		memcpy(out + n, q + DNS_HEADER, qlen);
		n += qlen;
	}
	if (a) {
		ASSERT(with_question && a->family == AF_INET);
		put16(out + n, 0xc000 | DNS_HEADER); /* the question's name */
		put16(out + n + 2, TYPE_A);
		put16(out + n + 4, CLASS_IN);
		put16(out + n + 6, 0);
		put16(out + n + 8, DNSSTUB_TTL);
		put16(out + n + 10, 4);
		memcpy(out + n + 12, a->bytes, 4);
		n += 16;
	}
	ASSERT(n <= DNSSTUB_ANSWER_MAX);
	return n;
}

/* ------------------------------------------------------------------ */
/* The decision                                                       */
/* ------------------------------------------------------------------ */

static bool port_in(uint16_t port, const uint16_t *ports, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ports[i] == port)
			return true;
	return false;
}

static bool rule_port_in(uint16_t port, const struct host_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (r[i].port > 0 && r[i].port == port)
			return true;
	return false;
}

struct ports_try {
	const struct policy *p;
	const struct host_target *t;
	bool have_deny;
	struct verdict deny; /* the first deny-rule verdict */
};

static bool try_port(struct ports_try *pt, uint16_t port)
{
	struct verdict v;

	egress_decide_rules(pt->p, pt->t, port, &v);
	if (v.action == VERDICT_ALLOW)
		return true;
	if (v.host_rule && !pt->have_deny) {
		pt->deny = v;
		pt->have_deny = true;
	}
	return false;
}

static bool listed(char *const *names, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* No deny rule takes @t on @port. */
static bool not_denied(const struct policy *p, const struct host_target *t,
		       uint16_t port)
{
	struct verdict v;

	egress_decide_rules(p, t, port, &v);
	return v.action == VERDICT_ALLOW || v.host_rule == NULL;
}

bool dnsstub_name_allowable(const struct policy *p,
			    const struct host_target *t,
			    struct verdict *v)
{
	struct ports_try pt;
	uint32_t port;
	size_t i;

	ASSERT(!t->is_addr);
	memset(&pt, 0, sizeof(pt));
	pt.p = p;
	pt.t = t;
	/* A rule's verdict depends on the port only through the ports the
	 * policy names (a rule's own, egress.ports): trying each of them
	 * and one port that none names covers all 65535. */
	for (i = 0; i < p->nports; i++)
		if (try_port(&pt, p->ports[i]))
			return true;
	for (i = 0; i < p->nallow; i++)
		if (p->allow[i].port > 0 && try_port(&pt, (uint16_t)p->allow[i].port))
			return true;
	for (i = 0; i < p->ndeny; i++)
		if (p->deny[i].port > 0 && try_port(&pt, (uint16_t)p->deny[i].port))
			return true;
	for (port = 1; port <= 65535; port++) {
		if (!port_in((uint16_t)port, p->ports, p->nports) &&
		    !rule_port_in((uint16_t)port, p->allow, p->nallow) &&
		    !rule_port_in((uint16_t)port, p->deny, p->ndeny)) {
			if (try_port(&pt, (uint16_t)port))
				return true;
			break;
		}
	}
	/* The git binding's hosts need no allow rule on 443 (and 22 for
	 * SSH); a deny rule still wins there. */
	if ((listed(p->git_hosts, p->ngit_hosts, t->name) ||
	     listed(p->git_api_hosts, p->ngit_api_hosts, t->name)) &&
	    not_denied(p, t, 443))
		return true;
	if (p->git_ssh && listed(p->git_hosts, p->ngit_hosts, t->name) &&
	    not_denied(p, t, 22))
		return true;
	if (pt.have_deny) {
		*v = pt.deny;
	} else {
		verdict_set(v, VERDICT_DENY, 403, "egress.default",
			    "no egress.allow rule could match this name on any port");
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* The stub                                                           */
/* ------------------------------------------------------------------ */

enum name_kind {
	NAME_ALLOWED = 0, /* or not decided: mode off */
	NAME_DENIED,      /* no rule could allow it */
	NAME_INVALID,     /* NXDOMAIN in every mode */
};

/* What the stub knows of one name; the key is its display form. */
struct name_info {
	char *key;
	enum name_kind kind;
	char rule_id[EGRESS_RULE_ID_MAX];
	const char *reason;
	bool recorded;
	bool has_addr;
	struct addr addr;
};

struct dnsstub {
	const struct policy *policy;
	struct dnsstub_table *table;
	void *names;      /* tsearch tree of struct name_info, by key:
			     O(log n) whatever names the agent picks */
	size_t nnames;
	size_t max_names;
};

static const char *const outcome_names[] = {
	[DNSSTUB_ANSWER] = "answer",
	[DNSSTUB_NODATA] = "nodata",
	[DNSSTUB_NXDOMAIN_POLICY] = "nxdomain-policy",
	[DNSSTUB_NXDOMAIN_INVALID] = "nxdomain-invalid",
	[DNSSTUB_SERVFAIL] = "servfail",
	[DNSSTUB_FORMERR] = "formerr",
	[DNSSTUB_NOTIMP] = "notimp",
	[DNSSTUB_REFUSED] = "refused",
	[DNSSTUB_DROP] = "drop",
};
static_assert(ARRAY_SIZE(outcome_names) == DNSSTUB_OUTCOME_COUNT,
	      "outcome_names must name every enum dnsstub_outcome");

const char *dnsstub_outcome_to_string(enum dnsstub_outcome o)
{
	if ((unsigned int)o >= DNSSTUB_OUTCOME_COUNT)
		return "unknown";
	return outcome_names[o];
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct name_info *)a)->key,
		      ((const struct name_info *)b)->key);
}

static void info_free(void *p)
{
	struct name_info *i = p;

	free(i->key);
	free(i);
}

struct dnsstub *dnsstub_new(const struct policy *p,
			    struct dnsstub_table *table)
{
	struct dnsstub *s = util_xcalloc(1, sizeof(*s));

	ASSERT(table->writer);
	s->policy = p;
	s->table = table;
	s->max_names = 2 * (size_t)table->capacity;
	return s;
}

void dnsstub_free(struct dnsstub *s)
{
	if (!s)
		return;
	tdestroy(s->names, info_free);
	free(s);
}

/* Decides the name of @qr into @i (key and addr untouched). */
static void decide(const struct dnsstub *s, const struct query *qr,
		   struct name_info *i)
{
	struct host_target t;
	struct verdict v;
	enum hostname_error e;

	i->kind = NAME_INVALID;
	snprintf(i->rule_id, sizeof(i->rule_id), "dns.invalid-name");
	if (!qr->text_ok) {
		i->reason = "not a valid DNS name (bytes outside a-z 0-9 - _)";
		return;
	}
	e = hostname_normalise(qr->text, qr->textlen, &t);
	if (e != HOSTNAME_OK) {
		i->reason = hostname_error_to_string(e);
		return;
	}
	if (t.is_addr) {
		i->reason = "an IP address written as a name";
		return;
	}
	i->kind = NAME_ALLOWED;
	i->rule_id[0] = '\0';
	i->reason = NULL;
	if (s->policy->mode == POLICY_MODE_OFF)
		return;
	if (!dnsstub_name_allowable(s->policy, &t, &v)) {
		i->kind = NAME_DENIED;
		snprintf(i->rule_id, sizeof(i->rule_id), "%s", v.rule);
		/* The stub keeps a static reason per name, not the verdict's
		 * buffer: these two are all egress_decide_rules() says. */
		i->reason = v.host_rule ? "denied by egress.deny"
					: "no egress.allow rule could match this name on any port";
	}
}

/* The stub's record of @qr's name, made and decided on first sight;
 * NULL when the stub knows too many names (then *tmp is decided). */
static struct name_info *info_get(struct dnsstub *s, const struct query *qr,
				  struct name_info *tmp)
{
	struct name_info key, *i, **slot;

	memset(&key, 0, sizeof(key));
	key.key = (char *)qr->display;
	slot = tfind(&key, &s->names, info_cmp);
	if (slot)
		return *slot;
	if (s->nnames >= s->max_names) {
		memset(tmp, 0, sizeof(*tmp));
		decide(s, qr, tmp);
		return NULL;
	}
	i = util_xcalloc(1, sizeof(*i));
	i->key = util_xstrdup(qr->display);
	decide(s, qr, i);
	slot = tsearch(i, &s->names, info_cmp);
	ASSERT(slot && *slot == i);
	s->nnames++;
	return i;
}

static unsigned int rcode_of(enum dnsstub_outcome o)
{
	switch (o) {
	case DNSSTUB_ANSWER:
	case DNSSTUB_NODATA:
		return RCODE_NOERROR;
	case DNSSTUB_NXDOMAIN_POLICY:
	case DNSSTUB_NXDOMAIN_INVALID:
		return RCODE_NXDOMAIN;
	case DNSSTUB_SERVFAIL:
		return RCODE_SERVFAIL;
	case DNSSTUB_NOTIMP:
		return RCODE_NOTIMP;
	case DNSSTUB_REFUSED:
		return RCODE_REFUSED;
	case DNSSTUB_FORMERR:
	case DNSSTUB_DROP:
	case DNSSTUB_OUTCOME_COUNT:
	default:
		return RCODE_FORMERR;
	}
}

size_t dnsstub_answer(struct dnsstub *s, const uint8_t *q, size_t qlen,
		      uint8_t *out, size_t outlen, struct dnsstub_result *res)
{
	struct name_info tmp, *i;
	enum dnsstub_outcome fail;
	struct query qr;

	ASSERT(outlen >= DNSSTUB_ANSWER_MAX);
	memset(&tmp, 0, sizeof(tmp));
	memset(res, 0, sizeof(*res));
	if (!parse_query(q, qlen, &qr, &fail)) {
		res->outcome = fail;
		res->has_question = qr.has_question;
		if (qr.has_question) {
			res->qtype = qr.qtype;
			memcpy(res->display, qr.display, qr.displen + 1);
		}
		if (fail == DNSSTUB_DROP)
			return 0;
		return build(out, q, &qr, qr.has_question, rcode_of(fail), NULL);
	}
	res->has_question = true;
	res->qtype = qr.qtype;
	memcpy(res->display, qr.display, qr.displen + 1);

	i = info_get(s, &qr, &tmp);
	if (!i)
		i = &tmp;
	if (i->kind == NAME_INVALID) {
		res->outcome = DNSSTUB_NXDOMAIN_INVALID;
		res->blocked = true;
	} else if (i->kind == NAME_DENIED && s->policy->mode == POLICY_MODE_ENFORCE) {
		res->outcome = DNSSTUB_NXDOMAIN_POLICY;
		res->blocked = true;
	} else {
		res->would_block = i->kind == NAME_DENIED;
		res->outcome = DNSSTUB_NODATA;
		if (qr.qtype == TYPE_A) {
			/* An address only for a name the stub remembers:
			 * else the next query would get a second one. */
			if (!i->has_addr && i != &tmp &&
			    dnsstub_table_add(s->table, qr.text, &i->addr) == 0)
				i->has_addr = true;
			if (i->has_addr) {
				res->outcome = DNSSTUB_ANSWER;
				res->addr = i->addr;
			} else {
				res->outcome = DNSSTUB_SERVFAIL;
				res->blocked = true;
				res->would_block = false;
			}
		}
	}
	if (res->outcome == DNSSTUB_SERVFAIL) {
		snprintf(res->rule_id, sizeof(res->rule_id), "dns.table-full");
		res->reason = "the session's table of synthetic addresses is full";
	} else if (res->blocked || res->would_block) {
		snprintf(res->rule_id, sizeof(res->rule_id), "%s", i->rule_id);
		res->reason = i->reason;
	}
	if (res->blocked || res->would_block) {
		res->record = !i->recorded;
		if (i != &tmp)
			i->recorded = true;
	}
	return build(out, q, &qr, true, rcode_of(res->outcome),
		     res->outcome == DNSSTUB_ANSWER ? &res->addr : NULL);
}
