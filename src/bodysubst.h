/* SPDX-License-Identifier: Apache-2.0
 * bodysubst.h - placeholders in request bodies: substituted in the body
 * fields a secret lists (`body`: "form:NAME", "json:/POINTER"), refused
 * anywhere else in a body to a host where such a secret is bound.
 *
 * Pure like subst.h: the caller gives the whole body, its Content-Type,
 * the method, path, the connection's host and port and whether the
 * request is inside verified, intercepted TLS.
 *
 *	if (bodysubst_wanted(set, host, port))  ask for the whole body, then
 *	bodysubst_decide(set, &req, body, len, &r);
 *	REFUSE: 403, secret.block (r.secret, r.why, r.field)
 *	REWRITE: send r.body (r.len bytes) instead, one secret.inject per
 *	         r.inj[i]
 *	bodysubst_result_free(&r);   wipes the rewritten body
 */
#ifndef AIRLOCK_BODYSUBST_H
#define AIRLOCK_BODYSUBST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "subst.h"

/* A body larger than this is not read for placeholders (the request is
 * refused 413 by the exchange: a filter asked for the whole body). */
#define BODYSUBST_MAX ((uint64_t)8 * 1024 * 1024)

struct bodysubst_request {
	const char *method;
	const char *path;            /* without the query; "/" at least */
	const char *content_type;    /* NULL: none */
	const struct host_target *host;
	uint16_t port;
	bool tls_verified;
};

struct bodysubst_inject {
	size_t secret;               /* index in the set */
	const char *field;           /* borrowed from the secret's list */
};

struct bodysubst_result {
	enum subst_verdict verdict;
	/* REFUSE: the secret whose placeholder was refused, why ("body": in
	 * no field it lists; "plain-http", "host", "path", "method": the
	 * field is listed but the request is not bound; "unreadable": a
	 * body holding a placeholder that does not parse as its
	 * Content-Type says), and the field it was in (a malloc'd
	 * "form:NAME" / "json:/POINTER", or NULL) */
	size_t secret;
	const char *why;
	char *field;
	/* REWRITE */
	struct bodysubst_inject *inj;
	size_t ninj;
	char *body;                  /* holds values: wiped when freed */
	size_t len;
};

/* Is some secret of @set that lists body fields bound to @host:@port? */
bool bodysubst_wanted(const struct subst_set *set, const struct host_target *host,
		      uint16_t port);

void bodysubst_decide(const struct subst_set *set, const struct bodysubst_request *req,
		      const char *body, size_t len, struct bodysubst_result *r);

void bodysubst_result_free(struct bodysubst_result *r);

#endif /* AIRLOCK_BODYSUBST_H */
