/* SPDX-License-Identifier: Apache-2.0
 * intercept.h - TLS interception: which hosts the proxy terminates TLS
 * for, and what a proxy needs to do it (the two TLS contexts and a way to
 * get a leaf certificate from the key holder).
 *
 * The connection-level steps (the two handshakes, then HTTP inside) are
 * internal to the proxy: conn.h declares them. This header is what the
 * key holder, the workers and `airlock proxy` share.
 */
#ifndef AIRLOCK_INTERCEPT_H
#define AIRLOCK_INTERCEPT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostname.h"
#include "policy.h"
#include "tls_ca.h"

/* Does @p intercept TLS to @t on @port? True for the hosts bound by a
 * secret, git.hosts and git.api_hosts, the spend providers' hosts and
 * egress.intercept; never in mode off. Host rules without a port stand
 * for egress.ports (as in egress.allow); git and spend hosts for 443. */
bool intercept_host_wanted(const struct policy *p, const struct host_target *t,
			   uint16_t port);

/* The same on any port: may a leaf be issued for @t (the key holder's
 * check of a worker's request)? */
bool intercept_host_named(const struct policy *p, const struct host_target *t);

/* Asks the key holder for a leaf for @host (normalised, IPv6 without
 * brackets). Returns 0 with @out filled (free it with tls_leaf_free()), or
 * -1 with one line in @err. It may block for the key holder's answer (a
 * few milliseconds, once per host and worker: leaves are cached). */
typedef int (*intercept_leaf_fn)(void *arg, const char *host, struct tls_leaf *out,
				 char *err, size_t errlen);

/* What a proxy needs to intercept; all borrowed, valid until proxy_free(). */
struct intercept_opts {
	SSL_CTX *server;          /* tls_server_ctx_new(): the sandbox's side */
	SSL_CTX *client;          /* tls_client_ctx_new(): the upstream side */
	intercept_leaf_fn leaf;
	void *leaf_arg;
};

/* A worker's cache of parsed leaves, one per host. */
struct intercept_cache;

struct intercept_cache *intercept_cache_new(SSL_CTX *client);
void intercept_cache_free(struct intercept_cache *ic);

#endif /* AIRLOCK_INTERCEPT_H */
