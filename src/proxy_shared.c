/* SPDX-License-Identifier: Apache-2.0
 * proxy_shared.c - what the proxy's workers share (struct proxy_shared,
 * MAP_SHARED memory made before the fork): the connections each client
 * address holds, per worker, and so the connection and client limits
 * (proxy.c's Theory of Operation). proxy.c admits a connection with
 * proxy_shared_acquire(), conn.c releases it when it closes; neither
 * needs the other for it.
 */
#include "proxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "addr.h"
#include "util.h"

#define FD_RESERVE 32          /* descriptors kept for everything else */
#define MAX_CONNS_DEFAULT 16384
#define WORKERS_MAX 1024

struct client_slot {
	struct addr a;     /* family 0: empty */
	uint32_t reported; /* a refusal was recorded since it was last under */
};

struct proxy_shared {
	pthread_mutex_t lock;     /* process-shared, robust */
	size_t map_len;
	unsigned int workers;
	unsigned int max_conns;
	unsigned int client_limit;
	uint32_t nslots;          /* a power of two */
	uint64_t seed;
	/* then: uint32_t live[workers]; struct client_slot slots[nslots];
	 * uint32_t counts[nslots * workers] */
};

static uint32_t *shared_live(struct proxy_shared *s)
{
	return (uint32_t *)(s + 1);
}

static struct client_slot *shared_slots(struct proxy_shared *s)
{
	size_t off = sizeof(*s) + s->workers * sizeof(uint32_t);

	off = (off + 15) & ~(size_t)15;
	return (struct client_slot *)((char *)s + off);
}

static uint32_t *shared_counts(struct proxy_shared *s)
{
	return (uint32_t *)(shared_slots(s) + s->nslots);
}

static size_t shared_size(unsigned int workers, uint32_t nslots)
{
	size_t off = sizeof(struct proxy_shared) + workers * sizeof(uint32_t);

	off = (off + 15) & ~(size_t)15;
	return off + nslots * sizeof(struct client_slot) +
	       (size_t)nslots * workers * sizeof(uint32_t);
}

/* Connections one process's descriptors can carry: two each. */
static unsigned int fd_conns(void)
{
	struct rlimit rl;
	rlim_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return MAX_CONNS_DEFAULT;
	n = rl.rlim_cur > FD_RESERVE + 2 ? (rl.rlim_cur - FD_RESERVE) / 2 : 1;
	return n > UINT32_MAX / 4 ? UINT32_MAX / 4 : (unsigned int)n;
}

struct proxy_shared *proxy_shared_new(unsigned int workers,
				      unsigned int max_conns,
				      unsigned int client_limit, char *err,
				      size_t errlen)
{
	pthread_mutexattr_t ma;
	struct proxy_shared *s;
	unsigned int limit, per;
	uint32_t nslots = 16;
	size_t len;
	void *m;

	if (workers == 0 || workers > WORKERS_MAX) {
		snprintf(err, errlen, "workers must be 1..%d", WORKERS_MAX);
		return NULL;
	}
	util_raise_fd_limit();
	limit = max_conns ? max_conns : MAX_CONNS_DEFAULT;
	per = fd_conns();
	if ((uint64_t)per * workers < limit)
		limit = per * workers;
	/* every distinct client holds at least one connection */
	while (nslots < 2u * limit && nslots < (1u << 24))
		nslots *= 2;
	len = shared_size(workers, nslots);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "shared memory: %s", strerror(errno));
		return NULL;
	}
	s = m;
	s->map_len = len;
	s->workers = workers;
	s->max_conns = limit;
	s->client_limit = client_limit ? client_limit : (limit / 4 ? limit / 4 : 1);
	s->nslots = nslots;
	util_random(&s->seed, sizeof(s->seed));
	if (pthread_mutexattr_init(&ma) != 0 ||
	    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) != 0 ||
	    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&s->lock, &ma) != 0) {
		snprintf(err, errlen, "shared memory: cannot make a shared lock");
		munmap(m, len);
		return NULL;
	}
	pthread_mutexattr_destroy(&ma);
	return s;
}

unsigned int proxy_shared_workers(const struct proxy_shared *s)
{
	return s->workers;
}

unsigned int proxy_shared_max_conns(const struct proxy_shared *s)
{
	return s->max_conns;
}

unsigned int proxy_shared_client_limit(const struct proxy_shared *s)
{
	return s->client_limit;
}

void proxy_shared_free(struct proxy_shared *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	munmap(s, s->map_len);
}

static void shared_lock(struct proxy_shared *s)
{
	/* A worker that died holding it leaves the table as it was between
	 * two stores: usable; its own counts are forgotten by the parent. */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&s->lock);
}

static void shared_unlock(struct proxy_shared *s)
{
	pthread_mutex_unlock(&s->lock);
}

static uint32_t slot_hash(const struct proxy_shared *s, const struct addr *a)
{
	uint64_t h = s->seed ^ (uint64_t)a->family;
	size_t i;

	for (i = 0; i < sizeof(a->bytes); i++) {
		h ^= a->bytes[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return (uint32_t)(h ^ (h >> 32));
}

/* The slot of @a, or the empty slot where it would go. */
static uint32_t slot_find(struct proxy_shared *s, const struct addr *a)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t mask = s->nslots - 1, i = slot_hash(s, a) & mask;

	while (slots[i].a.family != 0 && !addr_equal(&slots[i].a, a))
		i = (i + 1) & mask;
	return i;
}

static uint64_t slot_total(struct proxy_shared *s, uint32_t i)
{
	const uint32_t *cnt = shared_counts(s) + (size_t)i * s->workers;
	uint64_t t = 0;
	unsigned int w;

	for (w = 0; w < s->workers; w++)
		t += cnt[w];
	return t;
}

/* Empties slot @i, moving later entries of its run back (linear
 * probing's deletion without tombstones). */
static void slot_remove(struct proxy_shared *s, uint32_t i)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t *counts = shared_counts(s), mask = s->nslots - 1, j = i;

	for (;;) {
		slots[i].a.family = 0;
		memset(counts + (size_t)i * s->workers, 0, s->workers * sizeof(uint32_t));
		for (;;) {
			uint32_t home;

			j = (j + 1) & mask;
			if (slots[j].a.family == 0)
				return;
			home = slot_hash(s, &slots[j].a) & mask;
			/* j stays unless its home lies cyclically outside
			 * (i, j] */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		slots[i] = slots[j];
		memcpy(counts + (size_t)i * s->workers, counts + (size_t)j * s->workers,
		       s->workers * sizeof(uint32_t));
		i = j;
	}
}

/* The key of a client: an IPv4-mapped address is its IPv4 address. */
static void client_key(const struct addr *peer, struct addr *key)
{
	struct addr v4;

	*key = *peer;
	if (peer->family == AF_INET6 && addr_embedded_ipv4(peer, &v4) &&
	    memcmp(peer->bytes, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
		*key = v4;
	if (key->family != AF_INET && key->family != AF_INET6) {
		/* cannot happen with an IP listener; one shared key if it did */
		memset(key, 0, sizeof(*key));
		key->family = AF_INET;
	}
}

enum proxy_admit proxy_shared_acquire(struct proxy_shared *s, unsigned int worker,
				      const struct addr *peer)
{
	uint32_t *live = shared_live(s);
	struct client_slot *slots = shared_slots(s);
	enum proxy_admit r = ADMIT_OK;
	uint64_t total = 0;
	struct addr key;
	unsigned int w;
	uint32_t i;

	client_key(peer, &key);
	shared_lock(s);
	for (w = 0; w < s->workers; w++)
		total += live[w];
	if (total >= s->max_conns) {
		r = ADMIT_FULL;
		goto out;
	}
	i = slot_find(s, &key);
	if (slots[i].a.family == 0) {
		slots[i].a = key;
		slots[i].reported = 0;
	}
	if (slot_total(s, i) >= s->client_limit) {
		r = slots[i].reported ? ADMIT_CLIENT : ADMIT_CLIENT_FIRST;
		slots[i].reported = 1;
		goto out;
	}
	shared_counts(s)[(size_t)i * s->workers + worker]++;
	live[worker]++;
out:
	shared_unlock(s);
	return r;
}

void proxy_shared_release(struct proxy_shared *s, unsigned int worker,
			  const struct addr *peer)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t *cnt;
	struct addr key;
	uint32_t i;

	client_key(peer, &key);
	shared_lock(s);
	i = slot_find(s, &key);
	cnt = shared_counts(s) + (size_t)i * s->workers + worker;
	if (slots[i].a.family != 0 && *cnt > 0) {
		(*cnt)--;
		shared_live(s)[worker]--;
		if (slot_total(s, i) == 0)
			slot_remove(s, i);
		else if (slot_total(s, i) < s->client_limit)
			slots[i].reported = 0;
	}
	shared_unlock(s);
}

void proxy_shared_worker_gone(struct proxy_shared *s, unsigned int worker)
{
	struct client_slot *slots;
	uint32_t i;

	if (!s || worker >= s->workers)
		return;
	slots = shared_slots(s);
	shared_lock(s);
	if (shared_live(s)[worker] == 0) {
		/* it held nothing (live is the sum of its counts): nothing to
		 * forget, and the table's pages are not touched (at the end of
		 * every session, one call per worker) */
		shared_unlock(s);
		return;
	}
	shared_live(s)[worker] = 0;
	for (i = 0; i < s->nslots; i++)
		shared_counts(s)[(size_t)i * s->workers + worker] = 0;
	/* Removing shifts entries back: an entry moved to a slot already
	 * passed is checked again by staying on the same index. */
	for (i = 0; i < s->nslots;) {
		if (slots[i].a.family != 0 && slot_total(s, i) == 0) {
			slot_remove(s, i);
			continue;
		}
		i++;
	}
	shared_unlock(s);
}
