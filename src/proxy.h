/* SPDX-License-Identifier: Apache-2.0
 * proxy.h - the egress proxy (SPEC §3.2, §3.3, §5; docs/PROXY.md): one
 * epoll loop, a connection state machine, splice() relay.
 */
#ifndef AIRLOCK_PROXY_H
#define AIRLOCK_PROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>

#include "policy.h"
#include "receipt.h"

/* Writes one receipt; returns its seq, or -1 when there is no stream. */
typedef int64_t (*proxy_record_fn)(void *arg, const char *type,
				   enum receipt_decision d,
				   enum receipt_point point, const char *rule,
				   json_t *subject, const char *reason);

/* Called for every signal read from the signal fd; returns false to stop
 * the loop (see proxy_stop for draining). */
typedef bool (*proxy_signal_fn)(void *arg, const struct signalfd_siginfo *si);

struct proxy_timeouts {
	unsigned int head_ms;        /* whole request head: 10000 */
	unsigned int dns_ms;         /* 5000 */
	unsigned int connect_ms;     /* 10000 */
	unsigned int first_flight_ms;/* CONNECT's first client bytes: 10000 */
	unsigned int idle_ms;        /* tunnel / keep-alive idle: 300000 */
};

struct proxy_opts {
	int listen_fd;               /* listening socket; the proxy owns it */
	const struct policy *policy; /* borrowed until proxy_set_policy */
	proxy_record_fn record;
	void *record_arg;
	int signal_fd;               /* a signalfd to watch, or -1 */
	proxy_signal_fn on_signal;
	void *signal_arg;
	struct proxy_timeouts timeouts; /* zero fields take the defaults */
	unsigned int max_conns;      /* 0: 16384 */
};

struct proxy;

/* Creates the proxy (epoll, resolver). Returns NULL with a reason in
 * @err. */
struct proxy *proxy_new(const struct proxy_opts *opts, char *err, size_t errlen);

/* Serves until a signal handler returns false or proxy_stop() is called,
 * then drains. Returns 0, or -errno if the loop itself failed. */
int proxy_run(struct proxy *p);

/* Stops accepting; connections in progress get @drain_ms to finish, then
 * are closed. Safe to call from the signal callback. */
void proxy_stop(struct proxy *p, unsigned int drain_ms);

/* Replaces the policy for new requests (SIGHUP). Returns 0 or -1 with a
 * reason in @err (e.g. the resolver could not be reconfigured); the old
 * policy stays in force on failure. The caller keeps ownership of both. */
int proxy_set_policy(struct proxy *p, const struct policy *policy, char *err,
		     size_t errlen);

void proxy_free(struct proxy *p);

#endif /* AIRLOCK_PROXY_H */
