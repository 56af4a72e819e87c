/* SPDX-License-Identifier: Apache-2.0
 * session.h - a session's receipt stream as `airlock run` and `airlock
 * proxy` write it: session.start (or session.refused), the decisions,
 * session.end.
 */
#ifndef AIRLOCK_SESSION_H
#define AIRLOCK_SESSION_H

#include <jansson.h>
#include <stdint.h>

#include "doctor.h"
#include "policy.h"
#include "receipt.h"

struct session {
	const char *events;        /* --events DEST, or NULL: no stream */
	const struct policy *p;
	struct receipt_writer *w;  /* NULL without --events */
	char pubkey[64];
	struct doctor_caps caps;   /* probed once, at open */
	const char *id;
	const char *argv0;
};

/* The session id: @given (--session, already validated), else the
 * policy's session.id, else @prefix and 16 random hex digits. The caller
 * frees it. */
char *session_choose_id(const char *given, const struct policy *p,
			const char *prefix);

/* Exits 125 with one line naming the first error of the invalid policy
 * @path and how many more `airlock check` would list (SPEC §2: every 125
 * is one clear line). */
__attribute__((noreturn)) void session_die_invalid_policy(const char *path,
							  const struct policy_errors *errs);

/* Probes the host and opens the stream (when @events is not NULL), signed
 * with @signing_key or a fresh key. Dies with 125 on failure. */
void session_open(struct session *s, const char *events, const char *signing_key,
		  const struct policy *p, const char *id, const char *argv0);

/* Writes session.start (or session.refused): subject mode, capabilities,
 * pubkey, argv0. */
void session_begin(struct session *s, const char *type, enum receipt_decision d,
		   const char *rule, const char *reason);

/* Appends a receipt; takes @subject's reference. Returns the seq, or -1
 * without a stream. Dies with 125 if the stream cannot be written: a
 * session whose decisions cannot be recorded does not go on. */
int64_t session_record(struct session *s, const char *type,
		       enum receipt_decision d, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason);

/* The same, borrowing @subject: the signature of proxy_record_fn. */
int64_t session_record_borrowed(void *s, const char *type,
				enum receipt_decision d, enum receipt_point point,
				const char *rule, json_t *subject, const char *reason);

/* Switches to @p (a reload) and writes policy.reload. */
void session_reload(struct session *s, const struct policy *p);

/* Writes session.end with @status and closes the stream. */
void session_end(struct session *s, int status);

/* Refuses to start: session.refused (block) instead of session.start,
 * session.end with 125, @msg on stderr, exit 125. */
__attribute__((noreturn)) void session_refuse(struct session *s, const char *rule,
					      const char *msg);

#endif /* AIRLOCK_SESSION_H */
