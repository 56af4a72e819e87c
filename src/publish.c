/* SPDX-License-Identifier: Apache-2.0
 * publish.c - inbound ports: the `publish` listeners and their relay (see
 * publish.h).
 *
 * DOC: Theory of Operation
 *
 * Which process relays. Inbound bytes come from whoever reaches the
 * listener, and the answers from the agent's server: both are hostile
 * input, so the process that reads them holds no secret value and no key
 * (SPEC §4). The relay is forked by the supervisor after the key holder
 * started and before any secret is read; it wipes the environment it
 * inherited (which may hold secret values the supervisor was given). For
 * `auth` it is given the SHA-256 of the secret's value, and compares the
 * SHA-256 of what a request carries with it in constant time: the value
 * itself never reaches the relay, let alone the sandbox.
 *
 * How it reaches the sandbox. The sandbox's init passes out descriptors
 * of its user and network namespaces (sandbox.c, "N"); the relay, having
 * bound its listeners on the host first, joins them (setns), so that
 * every socket it opens afterwards lives in the sandbox's network
 * namespace, which has only loopback: it can reach the sandbox's
 * 127.0.0.1 and nothing else, and it connects only to the ports the
 * policy lists. Then it confines itself for good like a proxy worker
 * (confine.c: no capabilities, no_new_privs, seccomp, Landlock reading
 * nothing). It stays in the host's PID namespace, so nothing in the
 * sandbox can see or signal it, and it is not dumpable.
 *
 * What it does per connection. inbound.accept (peer, listener, port).
 * protocol "tcp": bytes relayed both ways, counted, recorded at the end
 * (inbound.close). protocol "http": each request head is parsed by the
 * strict parser of the egress proxy (http.c: 400 and a receipt for
 * anything it refuses), must be origin-form, must carry auth's value when
 * auth is set (else 401 and a receipt), loses that value (the
 * Authorization header, the auth cookie) and its framing headers are
 * written again from the parsed fields; the body is relayed by its
 * framing (Content-Length, chunked through the strict decoder). Requests
 * are served one at a time (a pipelined one waits for the answer before
 * it). The answer's head is parsed too; its body is counted against
 * max_response_bytes: a longer answer is cut there (the connection
 * closes) and recorded. A 101 answer to a WebSocket upgrade turns the
 * connection into a byte relay. Each exchange is one http.inbound
 * receipt: method, path without its query, status, bytes each way.
 *
 * Limits. max_conns connections open at once per listener (one more is
 * accepted, recorded as a block and closed); rate_bytes, a token bucket
 * per listener over the bytes read from both sides (one second's worth
 * of burst): a listener out of tokens is not read from until they come
 * back.
 */
#include "publish.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "addr.h"
#include "broker.h"
#include "confine.h"
#include "http.h"
#include "keeper.h"
#include "msg.h"
#include "child.h"
#include "receipt.h"
#include "sandbox.h"
#include "session.h"
#include "util.h"

#define PUBLISH_PROC_NAME "airlock-publish"
#define BUFCAP ((size_t)64 * 1024)
/* A head rewritten may grow by the framing line it gets. */
#define OUTCAP (BUFCAP + 256)
#define PATH_RECORD_MAX 1024

/* ---- the supervisor's side ------------------------------------------------ */

static struct {
	pid_t pid;
	int ctl;
	bool stopping;
	struct session *s;
	const struct policy *p;
} sup = { .pid = -1, .ctl = -1 };

static void format_listen(const struct policy_endpoint *e, char *out, size_t len)
{
	char a[ADDR_STRLEN];

	addr_format(&e->addr, a, sizeof(a));
	if (e->addr.family == AF_INET6)
		snprintf(out, len, "[%s]:%u", a, (unsigned)e->port);
	else
		snprintf(out, len, "%s:%u", a, (unsigned)e->port);
}

bool publish_parse_arg(const char *arg, char *listen, size_t listen_len,
		       uint16_t *port, char *why, size_t whylen)
{
	const char *last = strrchr(arg, ':'), *hp;
	char addr[ADDR_STRLEN + 2] = "127.0.0.1", hport[8];
	unsigned long lp, sp;
	struct addr a;
	size_t n;

	if (!last || !util_parse_uint(last + 1, 1, 65535, &sp) || last[1] == '0') {
		snprintf(why, whylen, "expected [ADDR:]PORT:SANDBOX_PORT, such as 8080:8080 "
			 "or 127.0.0.1:8080:3000");
		return false;
	}
	/* What is before the last ':': PORT, or ADDR:PORT. */
	hp = last;
	while (hp > arg && hp[-1] != ':')
		hp--;
	n = (size_t)(last - hp);
	if (n == 0 || n >= sizeof(hport)) {
		snprintf(why, whylen, "expected [ADDR:]PORT:SANDBOX_PORT");
		return false;
	}
	memcpy(hport, hp, n);
	hport[n] = '\0';
	if (hport[0] == '0' || !util_parse_uint(hport, 1, 65535, &lp)) {
		snprintf(why, whylen, "the host port must be 1 to 65535");
		return false;
	}
	if (hp > arg) {
		n = (size_t)(hp - 1 - arg);
		if (n >= 2 && arg[0] == '[' && arg[n - 1] == ']') {
			if (n - 2 >= sizeof(addr))
				goto bad_addr;
			memcpy(addr, arg + 1, n - 2);
			addr[n - 2] = '\0';
			if (!addr_parse(addr, &a) || a.family != AF_INET6)
				goto bad_addr;
		} else {
			if (n >= sizeof(addr))
				goto bad_addr;
			memcpy(addr, arg, n);
			addr[n] = '\0';
			if (!addr_parse(addr, &a) || a.family != AF_INET)
				goto bad_addr;
		}
	}
	if (!addr_parse(addr, &a))
		goto bad_addr;
	if (a.family == AF_INET6)
		snprintf(listen, listen_len, "[%s]:%lu", addr, lp);
	else
		snprintf(listen, listen_len, "%s:%lu", addr, lp);
	*port = (uint16_t)sp;
	return true;
bad_addr:
	snprintf(why, whylen, "ADDR must be an IPv4 address or an IPv6 one in brackets");
	return false;
}

void publish_merge_args(struct policy **p, char *const *args, size_t n)
{
	struct policy_errors errs = { 0 };
	enum policy_mode mode = (*p)->mode;
	json_t *root, *list;
	struct policy *q;
	char *text;
	size_t i;

	if (n == 0)
		return;
	root = json_loads((*p)->canonical, 0, NULL);
	ASSERT(root);
	list = json_object_get(root, "publish");
	ASSERT(json_is_array(list));
	for (i = 0; i < n; i++) {
		char listen[ADDR_STRLEN + 16], why[160];
		uint16_t port;

		if (!publish_parse_arg(args[i], listen, sizeof(listen), &port, why,
				       sizeof(why)))
			util_die(EXIT_AIRLOCK_FAILURE, "run: --publish %s: %s", args[i], why);
		json_array_append_new(list, json_pack("{s:s, s:i}", "listen", listen,
						      "port", (int)port));
	}
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	ASSERT(text);
	q = policy_parse(text, strlen(text), &mode, &errs);
	free(text);
	if (!q) {
		util_die(EXIT_AIRLOCK_FAILURE, "run: --publish: %s: %s",
			 errs.items[0].path, errs.items[0].message);
	}
	policy_free(*p);
	*p = q;
}

static bool listen_is_loopback(const struct policy_endpoint *e)
{
	return addr_classify(&e->addr) == ADDR_CLASS_LOOPBACK;
}

static int bind_listener(const struct policy_publish *pb, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	unsigned int len = addr_to_sockaddr(&pb->listen.addr, pb->listen.port, &ss);
	char name[ADDR_STRLEN + 16];
	int fd, one = 1;

	format_listen(&pb->listen, name, sizeof(name));
	fd = socket(pb->listen.addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (pb->listen.addr.family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "publish: cannot listen on %s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static __attribute__((noreturn)) void relay_main(const struct policy *p, int ctl, int kfd,
						 pid_t parent);

/* The relay's next message, which must be @want (else its last words,
 * MSG_FATAL, are the reason in @err). */
static int read_answer(uint32_t want, char *err, size_t errlen)
{
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg_reader r;
	const char *reason;
	ssize_t n;
	int fd, rc = -1;

	do
		n = msg_recv(sup.ctl, buf, MSG_MAX, &fd, 0);
	while (n == -EINTR);
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(err, errlen, "publish: the relay process ended during setup");
	} else if (msg_reader_init(&r, MSG_CHAN_PUBLISH, buf, (size_t)n) && r.type == want && msg_end(&r)) {
		rc = 0;
	} else if (r.type == MSG_FATAL && msg_get_str(&r, 400, &reason, NULL) &&
		   msg_end(&r)) {
		snprintf(err, errlen, "%s", reason);
	} else {
		snprintf(err, errlen, "publish: the relay said nonsense");
	}
	free(buf);
	return rc;
}

int publish_start(struct session *s, const struct policy *p, char *err, size_t errlen)
{
	int sv[2], kfd;
	pid_t parent = getpid();
	size_t i;

	if (p->npublish == 0)
		return 0;
	for (i = 0; i < p->npublish; i++) {
		const struct policy_publish *pb = &p->publish[i];
		char name[ADDR_STRLEN + 16];

		format_listen(&pb->listen, name, sizeof(name));
		if (p->mode == POLICY_MODE_ENFORCE && !pb->exposed && !listen_is_loopback(&pb->listen)) {
			snprintf(err, errlen, "publish[%zu].listen %s is not a loopback address: "
				 "in enforce mode a wildcard or outside address needs "
				 "\"exposed\": true (the port is then reachable from other "
				 "hosts)", i, name);
			return -1;
		}
		if (p->mode == POLICY_MODE_SHADOW && !pb->exposed &&
		    !listen_is_loopback(&pb->listen))
			util_warn("publish[%zu].listen %s is not a loopback address: enforce "
				  "mode refuses it without \"exposed\": true", i, name);
		if (pb->port == SANDBOX_PROXY_PORT) {
			snprintf(err, errlen, "publish[%zu].port %u is airlock's own proxy "
				 "port in the sandbox: it cannot be published", i,
				 (unsigned)pb->port);
			return -1;
		}
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "publish: socketpair: %s", strerror(errno));
		return -1;
	}
	kfd = session_worker_channel(s);
	sup.pid = fork();
	if (sup.pid < 0) {
		snprintf(err, errlen, "publish: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		if (kfd >= 0)
			close(kfd);
		return -1;
	}
	if (sup.pid == 0) {
		close(sv[0]);
		relay_main(p, sv[1], kfd, parent);
	}
	close(sv[1]);
	if (kfd >= 0)
		close(kfd);
	sup.ctl = sv[0];
	sup.s = s;
	sup.p = p;
	if (read_answer(MSG_PUBLISH_READY, err, errlen) < 0) {
		publish_stop();
		return -1;
	}
	return 0;
}

bool publish_active(void)
{
	return sup.pid > 0;
}

int publish_attach(struct sandbox *sb, const struct broker *b, char *err, size_t errlen)
{
	uint8_t digests[POLICY_PUBLISH_MAX][32];
	struct msg m = { 0 };
	size_t i, j;
	int r = 0;

	if (sup.pid <= 0)
		return 0;
	/* Transparent mode's listener took an ephemeral port of the sandbox's
	 * loopback: a published port must not name it (it would hand the
	 * proxy to whoever reaches the listener). */
	for (i = 0; i < 2; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct addr a;
		uint16_t port;

		if (sb->tlisten_fd[i] < 0 ||
		    getsockname(sb->tlisten_fd[i], (struct sockaddr *)&ss, &sl) < 0 ||
		    !addr_from_sockaddr((struct sockaddr *)&ss, sl, &a, &port))
			continue;
		for (j = 0; j < sup.p->npublish; j++)
			if (sup.p->publish[j].port == port) {
				snprintf(err, errlen, "publish[%zu].port %u is the port transparent "
					 "mode's listener took in the sandbox this time: publish "
					 "a port below 32768", j, (unsigned)port);
				return -1;
			}
	}
	memset(digests, 0, sizeof(digests));
	for (i = 0; i < sup.p->npublish; i++) {
		const char *name = sup.p->publish[i].auth;
		unsigned int mdlen = 0;

		if (!name)
			continue;
		for (j = 0; j < b->count; j++)
			if (strcmp(b->secrets[j].def->name, name) == 0)
				break;
		ASSERT(j < b->count);
		if (EVP_Digest(b->secrets[j].value, b->secrets[j].value_len, digests[i],
			       &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
			snprintf(err, errlen, "publish: SHA-256 failed");
			return -1;
		}
	}
	for (i = 0; i < 2 && r == 0; i++) {
		msg_start(&m, MSG_PUBLISH_NS);
		msg_put_u32(&m, i == 0 ? MSG_PUBLISH_NS_USER : MSG_PUBLISH_NS_NET);
		r = msg_send(sup.ctl, &m, sb->ns_fd[i], 0);
	}
	if (r == 0) {
		msg_start(&m, MSG_PUBLISH_AUTH);
		msg_put_bytes(&m, digests, 32 * sup.p->npublish);
		r = msg_send(sup.ctl, &m, -1, 0);
		OPENSSL_cleanse(m.buf, m.len);
	}
	msg_free(&m);
	OPENSSL_cleanse(digests, sizeof(digests));
	for (i = 0; i < 2; i++) {
		if (sb->ns_fd[i] >= 0)
			close(sb->ns_fd[i]);
		sb->ns_fd[i] = -1;
	}
	if (r < 0) {
		snprintf(err, errlen, "publish: cannot reach the relay: %s", strerror(-r));
		return -1;
	}
	return read_answer(MSG_PUBLISH_SERVING, err, errlen);
}

bool publish_reaped(pid_t pid, int wstatus)
{
	char how[128];

	if (sup.pid <= 0 || pid != sup.pid)
		return false;
	sup.pid = -1;
	if (sup.stopping || !sup.s)
		return true;
	if (WIFSIGNALED(wstatus))
		snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(wstatus));
	else
		snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(wstatus));
	session_record(sup.s, "proxy.error", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR, "publish",
		       json_pack("{s:i}", "pid", (int)pid),
		       "the relay of the published ports ended; they are closed");
	util_warn("publish: the relay ended (%s): the published ports are closed", how);
	return true;
}

pid_t publish_pid(void)
{
	return sup.pid > 0 ? sup.pid : -1;
}

void publish_stop(void)
{
	sup.stopping = true;
	if (sup.pid > 0) {
		kill(sup.pid, SIGKILL);
		while (waitpid(sup.pid, NULL, 0) < 0 && errno == EINTR)
			;
		sup.pid = -1;
	}
	if (sup.ctl >= 0)
		close(sup.ctl);
	sup.ctl = -1;
}

/* ---- header helpers (pure) -------------------------------------------------- */

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

/* The next cookie pair of @c (@n bytes) from *@i: [*@start, *@end) with
 * its surrounding blanks and ';' skipped, *@eq its '=' (or *@end when it
 * has none). False when the list is done. */
static bool next_cookie(const char *c, size_t n, size_t *i, size_t *start, size_t *eq,
			size_t *end)
{
	if (*i >= n)
		return false;
	while (*i < n && (ows(c[*i]) || c[*i] == ';'))
		(*i)++;
	*start = *i;
	while (*i < n && c[*i] != ';')
		(*i)++;
	*end = *i;
	while (*end > *start && ows(c[*end - 1]))
		(*end)--;
	for (*eq = *start; *eq < *end && c[*eq] != '='; (*eq)++)
		;
	return true;
}

const char *publish_auth_value(const char *authz, size_t authz_len,
			       const char *cookies, size_t cookies_len,
			       const char *cookie, size_t *len)
{
	if (authz && authz_len > 7 && strncasecmp(authz, "Bearer ", 7) == 0) {
		size_t i = 7;

		while (i < authz_len && ows(authz[i]))
			i++;
		if (i < authz_len) {
			*len = authz_len - i;
			return authz + i;
		}
	}
	if (cookies && cookie) {
		size_t cl = strlen(cookie), i = 0;

		size_t start, eq, end;

		while (next_cookie(cookies, cookies_len, &i, &start, &eq, &end)) {
			if (eq < end && eq - start == cl && memcmp(cookies + start, cookie, cl) == 0) {
				const char *v = cookies + eq + 1;
				size_t vl = end - eq - 1;

				if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
					v++;
					vl -= 2;
				}
				*len = vl;
				return v;
			}
		}
	}
	return NULL;
}

size_t publish_strip_cookie(const char *cookies, size_t cookies_len, const char *name,
			    char *out)
{
	size_t nl = strlen(name), i = 0, o = 0;

	size_t start, end, eq;

	while (next_cookie(cookies, cookies_len, &i, &start, &eq, &end)) {
		if (end == start)
			continue;
		if (eq - start == nl && memcmp(cookies + start, name, nl) == 0)
			continue;
		if (o > 0) {
			out[o++] = ';';
			out[o++] = ' ';
		}
		memcpy(out + o, cookies + start, end - start);
		o += end - start;
	}
	out[o] = '\0';
	return o;
}

/* ---- inside the relay ------------------------------------------------------ */

struct listener {
	const struct policy_publish *def;
	int fd;
	char name[ADDR_STRLEN + 16];
	bool has_auth;
	uint8_t digest[32];
	unsigned int nconns;
	double tokens;            /* rate_bytes: bytes that may be read now */
	uint64_t refill_ms;
};

enum qstate { Q_HEAD, Q_BODY_LEN, Q_BODY_CHUNKED, Q_WAIT, Q_TUNNEL, Q_DONE };
enum rstate { R_IDLE, R_HEAD, R_BODY_LEN, R_BODY_CHUNKED, R_BODY_CLOSE, R_TUNNEL };

struct pconn {
	struct listener *l;
	int cfd, sfd;             /* client (host side), sandbox */
	char peer[ADDR_STRLEN + 16];
	char cin[BUFCAP], sin[BUFCAP];
	size_t cin_len, sin_len;
	char sout[OUTCAP], cout[OUTCAP];
	size_t sout_len, sout_off, cout_len, cout_off;
	bool c_eof, s_eof, s_shut;
	bool closing;             /* flush cout, then close */
	bool dead;
	enum qstate q;
	enum rstate r;
	uint64_t q_left, r_left;
	struct http_chunked qch, rch;
	char method[33];
	char path[PATH_RECORD_MAX + 1];
	bool head_req, ws;
	unsigned int status;
	uint64_t req_bytes, resp_bytes, resp_body, total_in, total_out;
	bool resp_keep;
	bool req_keep;            /* the request allows another after it */
	uint64_t head_since;      /* when the wait for a request head began */
	bool connecting;          /* sfd's connect() is under way */
};

struct relay {
	unsigned int head_ms;     /* a started request head must end within */
	unsigned int idle_ms;     /* a connection between requests */
	struct keeper_link link;
	int ctl;
	struct listener *ls;
	size_t nls;
	struct pconn **c;
	size_t nc;
	const struct policy *p;
};

static int64_t rec(struct relay *x, bool want, const char *type, enum receipt_decision d,
		   const char *rule, json_t *subject, const char *reason)
{
	int64_t seq = -1;

	if (x->link.fd >= 0 &&
	    keeper_record(&x->link, want, type, d, RECEIPT_POINT_EGRESS_PROXY, rule, subject,
			  reason, &seq) < 0) {
		/* It must not serve what it cannot record. */
		util_warn("publish: cannot record a receipt: the key holder's channel failed");
		_exit(EXIT_AIRLOCK_FAILURE);
	}
	json_decref(subject);
	return seq;
}

static void conn_free(struct relay *x, size_t i)
{
	struct pconn *c = x->c[i];

	if (c->cfd >= 0)
		close(c->cfd);
	if (c->sfd >= 0)
		close(c->sfd);
	c->l->nconns--;
	if (c->l->def->protocol == POLICY_PUBLISH_TCP)
		rec(x, false, "inbound.close", RECEIPT_INFO, "publish",
		    json_pack("{s:s, s:s, s:i, s:I, s:I}", "peer", c->peer, "listener",
			      c->l->name, "port", (int)c->l->def->port,
			      "bytes_in", (json_int_t)c->total_in,
			      "bytes_out", (json_int_t)c->total_out),
		    "the inbound connection closed");
	/* What the buffers held may include a credential. */
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
	x->c[i] = x->c[--x->nc];
}

/* Drops the first @n bytes of the client's buffer. The bytes left behind
 * by the move are wiped: what a client sends may carry a credential. */
static void cin_consume(struct pconn *c, size_t n)
{
	memmove(c->cin, c->cin + n, c->cin_len - n);
	OPENSSL_cleanse(c->cin + c->cin_len - n, n);
	c->cin_len -= n;
}

static void put_out(struct pconn *c, const char *b, size_t n)
{
	size_t room = OUTCAP - c->cout_len;

	if (n > room)
		n = room;
	if (n > 0)
		memcpy(c->cout + c->cout_len, b, n);
	c->cout_len += n;
}

static void put_sout(struct pconn *c, const char *b, size_t n)
{
	ASSERT(n <= OUTCAP - c->sout_len);
	if (n > 0)
		memcpy(c->sout + c->sout_len, b, n);
	c->sout_len += n;
}

/* An answer of the relay itself, then the connection closes. */
static void answer(struct pconn *c, unsigned int status, const char *phrase, int64_t seq,
		   const char *extra, const char *body)
{
	char head[768], rs[48] = "";

	if (seq >= 0)
		snprintf(rs, sizeof(rs), "X-Airlock-Receipt: %lld\r\n", (long long)seq);
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s%s"
		 "Connection: close\r\nContent-Length: %zu\r\n\r\n",
		 status, phrase, extra ? extra : "", rs, strlen(body));
	c->cout_len = c->cout_off = 0;
	put_out(c, head, strlen(head));
	put_out(c, body, strlen(body));
	c->closing = true;
	c->q = Q_DONE;
}

static void record_exchange(struct relay *x, struct pconn *c, enum receipt_decision d,
			    const char *rule, const char *reason, bool cut, int64_t *seq)
{
	json_t *sub = json_pack("{s:s, s:s, s:i, s:s, s:s, s:i, s:I, s:I}", "peer", c->peer,
				"listener", c->l->name, "port", (int)c->l->def->port,
				"method", c->method, "path", c->path, "status", (int)c->status,
				"bytes_in", (json_int_t)c->req_bytes,
				"bytes_out", (json_int_t)c->resp_bytes);

	ASSERT(sub);
	if (cut)
		json_object_set_new(sub, "cut", json_true());
	if (c->l->def->auth)
		json_object_set_new(sub, "auth", json_string(c->l->def->auth));
	if (seq)
		*seq = rec(x, true, "http.inbound", d, rule, sub, reason);
	else
		rec(x, false, "http.inbound", d, rule, sub, reason);
}

/* A refusal of a request: status, a receipt, the connection closed. */
static void refuse(struct relay *x, struct pconn *c, unsigned int status, const char *phrase,
		   const char *rule, const char *why, const char *extra)
{
	char body[400];
	int64_t seq = -1;

	c->status = status;
	record_exchange(x, c, RECEIPT_BLOCK, rule, why, false, &seq);
	snprintf(body, sizeof(body), "airlock: %s (receipt %lld)\n", why, (long long)seq);
	answer(c, status, phrase, seq, extra, body);
}

static bool auth_ok(const struct listener *l, const char *v, size_t n)
{
	uint8_t md[32];
	unsigned int mdlen = 0;
	bool ok;

	if (!v)
		return false;
	if (EVP_Digest(v, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return false;
	ok = CRYPTO_memcmp(md, l->digest, 32) == 0;
	OPENSSL_cleanse(md, sizeof(md));
	return ok;
}

static void slice_copy(char *out, size_t cap, const char *p, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	if (n > 0) /* an absent slice is {NULL, 0} */
		memcpy(out, p, n);
	out[n] = '\0';
}

/* A complete request head at c->cin: checked, rewritten into sout. */
static void take_request(struct relay *x, struct pconn *c)
{
	const struct policy_publish *d = c->l->def;
	struct http_request req;
	enum http_result r = http_parse_request(c->cin, c->cin_len, &req, NULL);
	char line[256];
	size_t i, need;
	bool bearer = false;

	if (r == HTTP_INCOMPLETE) {
		if (c->c_eof && c->cin_len > 0) {
			strcpy(c->method, "-");
			c->path[0] = '\0';
			refuse(x, c, 400, "Bad Request", "publish.http",
			       "the request ended inside its head", NULL);
		} else if (c->c_eof) {
			c->q = Q_DONE;
		}
		return;
	}
	strcpy(c->method, "-");
	c->path[0] = '\0';
	c->req_bytes = 0;
	c->resp_bytes = 0;
	c->status = 0;
	if (r != HTTP_OK) {
		char why[200];

		snprintf(why, sizeof(why), "bad request: %s%s%s", req.error,
			 req.error_detail ? ": " : "", req.error_detail ? req.error_detail : "");
		refuse(x, c, 400, "Bad Request", "publish.http", why, NULL);
		return;
	}
	c->req_bytes = req.head_len;
	slice_copy(c->method, sizeof(c->method), req.method.ptr, req.method.len);
	slice_copy(c->path, sizeof(c->path), req.path.ptr, req.path.len);
	if (req.form != HTTP_FORM_ORIGIN || req.is_connect) {
		refuse(x, c, 400, "Bad Request", "publish.http",
		       "a published port takes origin-form requests (\"GET /path\") only", NULL);
		return;
	}
	if (c->l->has_auth) {
		size_t n = 0;
		const char *v = NULL;
		int ai, ci;

		ai = http_header_find(&req.headers, "authorization", 0);
		ci = http_header_find(&req.headers, "cookie", 0);
		if (ai >= 0 && http_header_find(&req.headers, "authorization", (size_t)ai + 1) >= 0)
			ai = -2;
		if (ai >= 0) {
			v = publish_auth_value(req.headers.h[ai].value.ptr,
					       req.headers.h[ai].value.len, NULL, 0, NULL, &n);
			bearer = v != NULL;
		}
		if (!bearer && d->auth_cookie)
			for (; ci >= 0 && !v; ci = http_header_find(&req.headers, "cookie",
								    (size_t)ci + 1))
				v = publish_auth_value(NULL, 0, req.headers.h[ci].value.ptr,
						       req.headers.h[ci].value.len,
						       d->auth_cookie, &n);
		if (ai == -2 || !auth_ok(c->l, v, n)) {
			refuse(x, c, 401, "Unauthorized", "publish.auth",
			       v ? "the request's credential is not the published port's auth value"
				 : "the request carries no credential for the published port",
			       "WWW-Authenticate: Bearer\r\n");
			return;
		}
	}
	/* The head to send: the request line, every field but the framing
	 * (written again) and the credential, which the agent never sees. */
	need = req.head_len + 64;
	if (need > OUTCAP - c->sout_len)
		return; /* when sout has drained */
	for (i = 0; i < req.head_len && c->cin[i] != '\n'; i++)
		;
	put_sout(c, c->cin, i + 1);
	for (i = 0; i < req.headers.count; i++) {
		const struct http_header *h = &req.headers.h[i];

		if (http_slice_eq_ci(h->name, "content-length") ||
		    http_slice_eq_ci(h->name, "transfer-encoding"))
			continue;
		if (bearer && http_slice_eq_ci(h->name, "authorization"))
			continue;
		if (c->l->has_auth && d->auth_cookie && http_slice_eq_ci(h->name, "cookie")) {
			char *kept = util_xmalloc(h->value.len + 1);
			size_t kn = publish_strip_cookie(h->value.ptr, h->value.len,
							 d->auth_cookie, kept);

			if (kn > 0) {
				put_sout(c, "Cookie: ", 8);
				put_sout(c, kept, kn);
				put_sout(c, "\r\n", 2);
			}
			OPENSSL_cleanse(kept, h->value.len + 1);
			free(kept);
			continue;
		}
		put_sout(c, h->name.ptr, h->name.len);
		put_sout(c, ": ", 2);
		put_sout(c, h->value.ptr, h->value.len);
		put_sout(c, "\r\n", 2);
	}
	if (req.body == HTTP_BODY_LENGTH)
		snprintf(line, sizeof(line), "Content-Length: %llu\r\n\r\n",
			 (unsigned long long)req.content_length);
	else if (req.body == HTTP_BODY_CHUNKED)
		snprintf(line, sizeof(line), "Transfer-Encoding: chunked\r\n\r\n");
	else
		snprintf(line, sizeof(line), "\r\n");
	put_sout(c, line, strlen(line));
	{
		int u = http_header_find(&req.headers, "upgrade", 0);

		c->ws = u >= 0 && http_slice_eq_ci(req.headers.h[u].value, "websocket");
	}
	/* The credential's bytes leave the relay's buffer too (the slices
	 * of @req point there: not used after this). */
	c->req_bytes = req.head_len;
	cin_consume(c, req.head_len);
	c->head_req = strcmp(c->method, "HEAD") == 0;
	c->req_keep = req.keep_alive;
	c->r = R_HEAD;
	if (req.body == HTTP_BODY_LENGTH && req.content_length > 0) {
		c->q = Q_BODY_LEN;
		c->q_left = req.content_length;
	} else if (req.body == HTTP_BODY_CHUNKED) {
		c->q = Q_BODY_CHUNKED;
		http_chunked_init(&c->qch, NULL);
	} else {
		c->q = Q_WAIT;
	}
}

/* Moves what may go from cin to sout. */
static void pump_client(struct relay *x, struct pconn *c)
{
	for (;;) {
		size_t room = OUTCAP - c->sout_len, n;

		if (c->closing || c->dead)
			return;
		switch (c->q) {
		case Q_HEAD:
			if (c->r != R_IDLE || (c->cin_len == 0 && !c->c_eof))
				return;
			if (c->sout_len > 0)
				return; /* one head at a time into an empty buffer */
			{
				enum qstate before = c->q;
				size_t len = c->cin_len;

				take_request(x, c);
				if (c->q == before && c->cin_len == len)
					return;
			}
			break;
		case Q_BODY_LEN:
			n = c->cin_len < c->q_left ? c->cin_len : (size_t)c->q_left;
			if (n > room)
				n = room;
			if (n == 0)
				return;
			put_sout(c, c->cin, n);
			cin_consume(c, n);
			c->q_left -= n;
			c->req_bytes += n;
			if (c->q_left == 0)
				c->q = Q_WAIT;
			break;
		case Q_BODY_CHUNKED: {
			struct http_slice data;
			size_t used = 0, lim = c->cin_len < room ? c->cin_len : room;
			enum http_chunked_result cr;

			if (lim == 0)
				return;
			cr = http_chunked_feed(&c->qch, c->cin, lim, &used, &data);
			if (cr == HTTP_CHUNKED_BAD) {
				c->status = 0;
				record_exchange(x, c, RECEIPT_BLOCK, "publish.http",
						"bad chunked request body: both connections closed",
						false, NULL);
				c->dead = true;
				return;
			}
			put_sout(c, c->cin, used);
			cin_consume(c, used);
			c->req_bytes += used;
			if (cr == HTTP_CHUNKED_DONE)
				c->q = Q_WAIT;
			else if (used == 0)
				return;
			break;
		}
		case Q_TUNNEL:
			n = c->cin_len < room ? c->cin_len : room;
			if (n == 0)
				return;
			put_sout(c, c->cin, n);
			cin_consume(c, n);
			c->req_bytes += n;
			break;
		case Q_WAIT:
			/* An answer that came before the request's body had all
			 * gone (a 413, say) is done: the next request may come. */
			if (c->r != R_IDLE)
				return;
			c->q = Q_HEAD;
			c->head_since = util_now_ms();
			break;
		case Q_DONE:
			return;
		}
	}
}

/* The answer's body passed @n more bytes: true when it went over the
 * limit (then only what fits was passed, and the connection is cut). */
static size_t body_allow(struct pconn *c, size_t n, bool *cut)
{
	uint64_t max = c->l->def->max_response_bytes;

	*cut = false;
	if (max && c->resp_body + n > max) {
		*cut = true;
		return (size_t)(max - c->resp_body);
	}
	return n;
}

static void response_done(struct relay *x, struct pconn *c)
{
	record_exchange(x, c, RECEIPT_ALLOW, "publish", "relayed", false, NULL);
	c->r = R_IDLE;
	if (!c->resp_keep) {
		c->closing = true;
		c->q = Q_DONE;
	} else if (c->q == Q_WAIT) {
		c->q = Q_HEAD;
		c->head_since = util_now_ms();
	}
}

static void cut_response(struct relay *x, struct pconn *c)
{
	char why[160];

	snprintf(why, sizeof(why), "the answer is longer than max_response_bytes (%llu): "
		 "cut there and the connection closed",
		 (unsigned long long)c->l->def->max_response_bytes);
	if (c->l->def->protocol == POLICY_PUBLISH_HTTP)
		record_exchange(x, c, RECEIPT_BLOCK, "publish.max_response_bytes", why, true, NULL);
	else
		rec(x, false, "inbound.cut", RECEIPT_BLOCK, "publish.max_response_bytes",
		    json_pack("{s:s, s:s, s:i, s:I, s:I}", "peer", c->peer, "listener",
			      c->l->name, "port", (int)c->l->def->port,
			      "bytes_in", (json_int_t)c->total_in,
			      "bytes_out", (json_int_t)c->total_out), why);
	c->closing = true;
	c->q = Q_DONE;
	c->r = R_IDLE;
	c->sin_len = 0;
}

/* Moves what may go from sin to cout. */
static void pump_sandbox(struct relay *x, struct pconn *c)
{
	for (;;) {
		size_t room = OUTCAP - c->cout_len, n;
		bool cut;

		if (c->closing || c->dead)
			return;
		switch (c->r) {
		case R_IDLE:
			if (c->sin_len > 0) {
				/* An answer nobody asked for. */
				c->dead = true;
			}
			if (c->s_eof && c->sin_len == 0 && c->q != Q_TUNNEL)
				c->closing = true;
			return;
		case R_HEAD: {
			struct http_response resp;
			enum http_result hr;

			if (c->sin_len == 0 && !c->s_eof)
				return;
			hr = http_parse_response(c->sin, c->sin_len, &resp, NULL, c->head_req);
			if (hr == HTTP_INCOMPLETE && !c->s_eof)
				return;
			if (hr != HTTP_OK) {
				if (c->cout_len == 0 && c->resp_bytes == 0) {
					c->status = 502;
					refuse(x, c, 502, "Bad Gateway", "publish.http",
					       c->sin_len ? "the agent's server sent a bad answer"
							  : "the agent's server closed without an answer",
					       NULL);
				} else {
					c->dead = true;
				}
				return;
			}
			if (resp.head_len > room)
				return;
			put_out(c, c->sin, resp.head_len);
			memmove(c->sin, c->sin + resp.head_len, c->sin_len - resp.head_len);
			c->sin_len -= resp.head_len;
			c->resp_bytes += resp.head_len;
			c->status = resp.status;
			if (resp.status == 101) {
				if (!c->ws) {
					c->dead = true;
					return;
				}
				record_exchange(x, c, RECEIPT_ALLOW, "publish",
						"WebSocket upgrade: frames relayed", false, NULL);
				c->q = Q_TUNNEL;
				c->r = R_TUNNEL;
				break;
			}
			if (resp.status < 200)
				break; /* 100 Continue and friends: the final head follows */
			c->resp_body = 0;
			c->resp_keep = resp.keep_alive && c->req_keep;
			switch (resp.body) {
			case HTTP_BODY_NONE:
				response_done(x, c);
				break;
			case HTTP_BODY_LENGTH:
				c->r_left = resp.content_length;
				c->r = R_BODY_LEN;
				if (c->r_left == 0)
					response_done(x, c);
				break;
			case HTTP_BODY_CHUNKED:
				http_chunked_init(&c->rch, NULL);
				c->r = R_BODY_CHUNKED;
				break;
			case HTTP_BODY_UNTIL_CLOSE:
				c->r = R_BODY_CLOSE;
				c->resp_keep = false;
				break;
			}
			break;
		}
		case R_BODY_LEN:
		case R_BODY_CLOSE:
		case R_TUNNEL:
			n = c->sin_len < room ? c->sin_len : room;
			if (c->r == R_BODY_LEN && n > c->r_left)
				n = (size_t)c->r_left;
			if (c->r == R_BODY_CLOSE && n == 0 && c->s_eof && c->sin_len == 0) {
				response_done(x, c);
				return;
			}
			if (n == 0)
				return;
			if (c->l->def->protocol == POLICY_PUBLISH_HTTP && c->r != R_TUNNEL)
				n = body_allow(c, n, &cut);
			else
				cut = false;
			put_out(c, c->sin, n);
			memmove(c->sin, c->sin + n, c->sin_len - n);
			c->sin_len -= n;
			c->resp_bytes += n;
			c->resp_body += n;
			if (cut) {
				cut_response(x, c);
				return;
			}
			if (c->r == R_BODY_LEN) {
				c->r_left -= n;
				if (c->r_left == 0)
					response_done(x, c);
			}
			break;
		case R_BODY_CHUNKED: {
			struct http_slice data;
			size_t used = 0, lim = c->sin_len < room ? c->sin_len : room;
			enum http_chunked_result cr;

			if (lim == 0)
				return;
			cr = http_chunked_feed(&c->rch, c->sin, lim, &used, &data);
			if (cr == HTTP_CHUNKED_BAD) {
				c->dead = true;
				return;
			}
			n = body_allow(c, used, &cut);
			put_out(c, c->sin, n);
			memmove(c->sin, c->sin + used, c->sin_len - used);
			c->sin_len -= used;
			c->resp_bytes += n;
			c->resp_body += n;
			if (cut) {
				cut_response(x, c);
				return;
			}
			if (cr == HTTP_CHUNKED_DONE)
				response_done(x, c);
			else if (used == 0)
				return;
			break;
		}
		}
	}
}

/* tcp: bytes both ways, counted; max_response_bytes over the whole
 * connection. */
static void pump_tcp(struct relay *x, struct pconn *c)
{
	size_t n = c->cin_len < OUTCAP - c->sout_len ? c->cin_len : OUTCAP - c->sout_len;
	uint64_t max = c->l->def->max_response_bytes;

	put_sout(c, c->cin, n);
	cin_consume(c, n);
	n = c->sin_len < OUTCAP - c->cout_len ? c->sin_len : OUTCAP - c->cout_len;
	if (max && c->total_out + n > max) {
		n = (size_t)(max - c->total_out);
		put_out(c, c->sin, n);
		c->total_out += n;
		cut_response(x, c);
		return;
	}
	put_out(c, c->sin, n);
	memmove(c->sin, c->sin + n, c->sin_len - n);
	c->sin_len -= n;
	c->total_out += n;
	if (c->s_eof && c->sin_len == 0)
		c->closing = true;
}

static void pump(struct relay *x, struct pconn *c)
{
	if (c->l->def->protocol == POLICY_PUBLISH_TCP) {
		pump_tcp(x, c);
		return;
	}
	pump_client(x, c);
	pump_sandbox(x, c);
	/* A head taken after the answer before it was done. */
	pump_client(x, c);
	if (c->q == Q_DONE && c->r == R_IDLE && !c->closing && c->cout_len == c->cout_off)
		c->closing = true;
}

/* Nothing listens on the published port in the sandbox: 502 (http) or
 * the connection closed (tcp). */
static void connect_failed(struct relay *x, struct pconn *c)
{
	c->s_eof = true;
	if (c->l->def->protocol == POLICY_PUBLISH_HTTP) {
		c->closing = false;
		strcpy(c->method, "-");
		c->status = 502;
		refuse(x, c, 502, "Bad Gateway", "publish.connect",
		       "nothing listens on the published port in the sandbox", NULL);
	} else {
		c->closing = true;
	}
}

static void accept_one(struct relay *x, struct listener *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sockaddr_in sin;
	struct pconn *c;
	struct addr a;
	uint16_t pport = 0;
	char as[ADDR_STRLEN] = "?", peer[ADDR_STRLEN + 16];
	int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC), sfd;

	if (fd < 0)
		return;
	if (addr_from_sockaddr((struct sockaddr *)&ss, sl, &a, &pport))
		addr_format(&a, as, sizeof(as));
	snprintf(peer, sizeof(peer), a.family == AF_INET6 ? "[%s]:%u" : "%s:%u", as,
		 (unsigned)pport);
	if (l->nconns >= l->def->max_conns) {
		rec(x, false, "inbound.accept", RECEIPT_BLOCK, "publish.max_conns",
		    json_pack("{s:s, s:s, s:i}", "peer", peer, "listener", l->name, "port",
			      (int)l->def->port),
		    "the listener has max_conns connections open: this one was closed");
		close(fd);
		return;
	}
	rec(x, false, "inbound.accept", RECEIPT_ALLOW, "publish",
	    json_pack("{s:s, s:s, s:i, s:s}", "peer", peer, "listener", l->name, "port",
		      (int)l->def->port, "protocol",
		      policy_publish_protocol_to_string(l->def->protocol)),
	    "an inbound connection to a published port");
	/* In the sandbox's network namespace: its loopback, the listed port. */
	/* Non-blocking: an agent that never accepts (a full backlog) must not
	 * stall the other connections. */
	sfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(l->def->port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c = util_xcalloc(1, sizeof(*c));
	c->l = l;
	c->cfd = fd;
	c->sfd = -1;
	c->head_since = util_now_ms();
	memcpy(c->peer, peer, sizeof(peer));
	l->nconns++;
	x->c = util_xrealloc(x->c, (x->nc + 1) * sizeof(struct pconn *));
	x->c[x->nc++] = c;
	if (sfd < 0 || (connect(sfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 &&
			errno != EINPROGRESS)) {
		if (sfd >= 0)
			close(sfd);
		connect_failed(x, c);
		return;
	}
	c->connecting = errno == EINPROGRESS;
	c->sfd = sfd;
}

/* The connection to the sandbox's port is done: true when it succeeded. */
static bool connect_done(struct relay *x, struct pconn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	c->connecting = false;
	if (getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
		return true;
	close(c->sfd);
	c->sfd = -1;
	connect_failed(x, c);
	return false;
}

/* Reads what the listener's tokens allow; returns bytes read, 0 at EOF
 * (sets *eof), -1 when nothing now. */
static ssize_t read_some(struct listener *l, int fd, char *buf, size_t room, bool *eof)
{
	ssize_t n;

	if (l->def->rate_bytes) {
		if (l->tokens < 1)
			return -1;
		if ((double)room > l->tokens)
			room = (size_t)l->tokens;
	}
	if (room == 0)
		return -1;
	n = recv(fd, buf, room, 0);
	if (n == 0)
		*eof = true;
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		*eof = true;
		return 0;
	}
	if (n > 0 && l->def->rate_bytes)
		l->tokens -= (double)n;
	return n;
}

static bool flush(int fd, char *buf, size_t *len, size_t *off)
{
	while (*off < *len) {
		ssize_t n = send(fd, buf + *off, *len - *off, MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		*off += (size_t)n;
	}
	*len = *off = 0;
	return true;
}

static void refill(struct relay *x)
{
	uint64_t now = util_now_ms();
	size_t i;

	for (i = 0; i < x->nls; i++) {
		struct listener *l = &x->ls[i];
		double cap = (double)l->def->rate_bytes;

		if (!l->def->rate_bytes)
			continue;
		l->tokens += cap * (double)(now - l->refill_ms) / 1000.0;
		if (l->tokens > cap)
			l->tokens = cap;
		l->refill_ms = now;
	}
}

/* A request head that does not come: a started one within head_ms
 * (408 and a receipt: slowloris), none at all within idle_ms (closed). */
static void head_timeout(struct relay *x, struct pconn *c)
{
	uint64_t waited;

	if (c->l->def->protocol != POLICY_PUBLISH_HTTP || c->q != Q_HEAD ||
	    c->r != R_IDLE || c->closing || c->dead)
		return;
	waited = util_now_ms() - c->head_since;
	if (c->cin_len > 0 && waited >= x->head_ms) {
		strcpy(c->method, "-");
		c->path[0] = '\0';
		c->req_bytes = c->cin_len;
		c->resp_bytes = 0;
		refuse(x, c, 408, "Request Timeout", "publish.http",
		       "the request head did not end in time", NULL);
	} else if (c->cin_len == 0 && waited >= x->idle_ms) {
		c->closing = true;
	}
}

static void serve(struct relay *x)
{
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	for (;;) {
		size_t n = 0, i;
		int timeout = -1;

		refill(x);
		if (!pfd || cap < x->nls + 2 * x->nc + 1) {
			cap = x->nls + 2 * x->nc + 64;
			pfd = util_xrealloc(pfd, cap * sizeof(*pfd));
		}
		pfd[n++] = (struct pollfd){ .fd = x->ctl, .events = POLLIN };
		for (i = 0; i < x->nls; i++)
			pfd[n++] = (struct pollfd){ .fd = x->ls[i].fd, .events = POLLIN };
		for (i = 0; i < x->nc; i++) {
			struct pconn *c = x->c[i];

			if (c->l->def->protocol == POLICY_PUBLISH_HTTP && c->q == Q_HEAD &&
			    c->r == R_IDLE && !c->closing && (timeout < 0 || timeout > 1000))
				timeout = 1000;
		}
		for (i = 0; i < x->nc; i++) {
			struct pconn *c = x->c[i];
			bool tok = !c->l->def->rate_bytes || c->l->tokens >= 1;
			short ce = 0, se = 0;

			if (!tok)
				timeout = 50;
			if (!c->c_eof && !c->closing && c->cin_len < BUFCAP && tok)
				ce |= POLLIN;
			if (c->cout_len > c->cout_off)
				ce |= POLLOUT;
			if (c->sfd >= 0 && !c->s_eof && !c->closing && c->sin_len < BUFCAP && tok)
				se |= POLLIN;
			if (c->sfd >= 0 && (c->sout_len > c->sout_off || c->connecting))
				se |= POLLOUT;
			if (c->connecting)
				se = POLLOUT;
			/* A side at its end with nothing to write is not polled (a
			 * hung-up socket would report POLLHUP at once, every time). */
			pfd[n++] = (struct pollfd){ .fd = c->c_eof && !(ce & POLLOUT) ? -1 : c->cfd,
						    .events = ce };
			pfd[n++] = (struct pollfd){ .fd = c->s_eof && !(se & POLLOUT) ? -1 : c->sfd,
						    .events = se };
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			_exit(EXIT_AIRLOCK_FAILURE);
		}
		if (pfd[0].revents)
			_exit(0); /* the supervisor is gone or asks us to stop */
		/* Connections first (their slots in pfd), then the listeners. */
		for (i = x->nc; i-- > 0;) {
			struct pconn *c = x->c[i];
			struct pollfd *cp = &pfd[1 + x->nls + 2 * i], *sp = cp + 1;
			ssize_t r;

			if (cp->revents & (POLLIN | POLLHUP | POLLERR)) {
				r = read_some(c->l, c->cfd, c->cin + c->cin_len, BUFCAP - c->cin_len,
					      &c->c_eof);
				/* A head's time starts with its first byte. */
				if (r > 0 && c->cin_len == 0 && c->q == Q_HEAD)
					c->head_since = util_now_ms();
				if (r > 0) {
					c->cin_len += (size_t)r;
					c->total_in += (size_t)r;
				}
			}
			if (c->connecting && sp->revents && !connect_done(x, c))
				sp->revents = 0;
			if (c->sfd >= 0 && !c->connecting &&
			    (sp->revents & (POLLIN | POLLHUP | POLLERR))) {
				r = read_some(c->l, c->sfd, c->sin + c->sin_len, BUFCAP - c->sin_len,
					      &c->s_eof);
				if (r > 0)
					c->sin_len += (size_t)r;
			}
			if (!c->connecting)
				pump(x, c);
			head_timeout(x, c);
			if (c->sfd >= 0 && !c->connecting && !flush(c->sfd, c->sout, &c->sout_len, &c->sout_off))
				c->dead = true;
			if (!flush(c->cfd, c->cout, &c->cout_len, &c->cout_off))
				c->dead = true;
			/* The client is done sending: so is the sandbox's side. */
			if (c->c_eof && !c->s_shut && c->sfd >= 0 && c->cin_len == 0 &&
			    c->sout_len == 0 && (c->q == Q_TUNNEL || c->l->def->protocol ==
						 POLICY_PUBLISH_TCP)) {
				shutdown(c->sfd, SHUT_WR);
				c->s_shut = true;
			}
			if (c->c_eof && c->q == Q_HEAD && c->cin_len == 0 && c->r == R_IDLE)
				c->closing = true;
			if (c->c_eof && c->s_eof)
				c->closing = true;
			if (c->dead || (c->closing && c->cout_len == 0))
				conn_free(x, i);
		}
		for (i = 0; i < x->nls; i++)
			if (pfd[1 + i].revents & POLLIN)
				accept_one(x, &x->ls[i]);
	}
}

/* The relay keeps only the tests' timeouts of the environment. */
static bool relay_env_kept(const char *entry)
{
	return strncmp(entry, "AIRLOCK_TEST_TIMEOUTS=", 22) == 0;
}

/* Receives the supervisor's next message into @buf, which must be @want;
 * anything else ends the relay. Returns its descriptor (or -1). */
static int relay_recv(int ctl, uint8_t *buf, uint32_t want, struct msg_reader *r)
{
	ssize_t n;
	int fd;

	do
		n = msg_recv(ctl, buf, MSG_MAX, &fd, 0);
	while (n == -EINTR);
	if (n <= 0 || !msg_reader_init(r, MSG_CHAN_PUBLISH, buf, (size_t)n) || r->type != want)
		child_fatal("publish: the supervisor did not send %s",
			    msg_type_to_string(want));
	return fd;
}

static void relay_say(int ctl, uint32_t t)
{
	struct msg m = { 0 };

	msg_start(&m, t);
	if (msg_send(ctl, &m, -1, 0) < 0)
		_exit(EXIT_AIRLOCK_FAILURE);
	msg_free(&m);
}

static __attribute__((noreturn)) void relay_main(const struct policy *p, int ctl, int kfd,
						 pid_t parent)
{
	static const char *const no_reads[] = { "/dev/urandom" };
	const int keep[] = { ctl, kfd, STDERR_FILENO };
	int nsfd[2] = { -1, -1 };
	uint8_t *buf;
	const void *digests;
	struct msg_reader r;
	struct relay x;
	char err[512];
	size_t i, len;

	child_start(&(struct child_spec){ .name = PUBLISH_PROC_NAME, .who = "publish relay",
					  .parent = parent, .ctl = ctl, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep), .null_stdio = true,
					  .ignore_session_signals = true,
					  .keep_env = relay_env_kept });
	/* The terminal's signals reach the whole group: the supervisor
	 * decides when we stop. */
	signal(SIGTSTP, SIG_IGN);
	memset(&x, 0, sizeof(x));
	x.p = p;
	x.ctl = ctl;
	x.link.fd = kfd;
	/* Tests shorten these (docs/TESTING.md). */
	x.head_ms = util_test_ms("head", 10000);
	x.idle_ms = util_test_ms("idle", 300000);
	x.ls = util_xcalloc(p->npublish, sizeof(*x.ls));
	x.nls = p->npublish;
	for (i = 0; i < p->npublish; i++) {
		struct listener *l = &x.ls[i];

		l->def = &p->publish[i];
		format_listen(&l->def->listen, l->name, sizeof(l->name));
		l->fd = bind_listener(l->def, err, sizeof(err));
		if (l->fd < 0)
			child_fatal("%s", err);
		l->tokens = (double)l->def->rate_bytes;
		l->refill_ms = util_now_ms();
	}
	relay_say(ctl, MSG_PUBLISH_READY);

	/* The sandbox's namespaces, then the auth digests. */
	buf = util_xmalloc(MSG_MAX);
	for (i = 0; i < 2; i++) {
		uint32_t role;
		int fd = relay_recv(ctl, buf, MSG_PUBLISH_NS, &r);

		if (fd < 0 || !msg_get_u32(&r, &role) || !msg_end(&r) || role > 1 ||
		    nsfd[role] >= 0)
			child_fatal("publish: the supervisor sent a bad namespace message");
		nsfd[role] = fd;
	}
	if (relay_recv(ctl, buf, MSG_PUBLISH_AUTH, &r) >= 0 ||
	    !msg_get_bytes(&r, (size_t)32 * POLICY_PUBLISH_MAX, &digests, &len) ||
	    !msg_end(&r) || len != 32 * p->npublish)
		child_fatal("publish: the supervisor sent a bad auth message");
	for (i = 0; i < p->npublish; i++) {
		x.ls[i].has_auth = p->publish[i].auth != NULL;
		memcpy(x.ls[i].digest, (const uint8_t *)digests + 32 * i, 32);
	}
	OPENSSL_cleanse(buf, MSG_MAX);
	free(buf);
	/* Joining the network namespace takes CAP_SYS_ADMIN over it: a
	 * privileged caller has it already; an unprivileged one gets it by
	 * joining the sandbox's user namespace, which it created. */
	if (setns(nsfd[MSG_PUBLISH_NS_NET], CLONE_NEWNET) < 0 &&
	    (setns(nsfd[MSG_PUBLISH_NS_USER], CLONE_NEWUSER) < 0 ||
	     setns(nsfd[MSG_PUBLISH_NS_NET], CLONE_NEWNET) < 0))
		child_fatal("publish: joining the sandbox's network namespace: %s",
			    strerror(errno));
	close(nsfd[0]);
	close(nsfd[1]);
	if (confine_self(CONFINE_WORKER, no_reads, ARRAY_SIZE(no_reads), err, sizeof(err)) < 0)
		child_fatal("publish: %s", err);
	relay_say(ctl, MSG_PUBLISH_SERVING);
	serve(&x);
	_exit(0);
}
