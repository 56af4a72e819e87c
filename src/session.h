/* SPDX-License-Identifier: Apache-2.0
 * session.h - a session's receipt stream as `airlock run` and `airlock
 * proxy` write it: session.start (or session.refused), the decisions,
 * session.end. The supervisor's side: every line is written by the key
 * holder (keeper.c), which session_open() starts.
 */
#ifndef AIRLOCK_SESSION_H
#define AIRLOCK_SESSION_H

#include <jansson.h>
#include <stdint.h>

#include "doctor.h"
#include "keeper.h"
#include "policy.h"
#include "receipt.h"

struct session {
	const char *events;        /* --events DEST, or NULL: no stream */
	const struct policy *p;
	bool open;                 /* the key holder runs: a stream is written */
	struct keeper k;           /* valid while open */
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
 * @path and how many more `airlock check` would list (every 125 is one
 * clear line). */
__attribute__((noreturn)) void session_die_invalid_policy(const char *path,
							  const struct policy_errors *errs);

/* Starts the key holder, which opens the stream (when @events is not
 * NULL) signed with @signing_key or a fresh key, and probes the host
 * meanwhile. The supervisor never reads @signing_key: only the key
 * holder does. Call it before any secret is read, so that the key holder,
 * a fork of the caller, never holds one. Dies with 125 on failure. */
void session_open(struct session *s, const char *events, const char *signing_key,
		  const struct policy *p, const char *id, const char *argv0);

/* The session CA of TLS interception, made (or loaded) by the key holder. */
struct session_ca {
	const char *cert, *key;    /* --ca-cert/--ca-key, or NULL: a fresh CA */
	long lifetime;             /* a fresh CA's validity; 0: the default */
};

/* session_open() with a session CA in the key holder (@ca NULL: none).
 * Leaves are issued for the hosts @p intercepts. */
/* run --witness URL=KEYFILE: every session opened after this asks that
 * witness to cosign its last checkpoint; exits 125 on a bad spec or key. */
void session_set_witness(const char *spec);

/* --events DEST of command @cmd ("run", "proxy"), which may be given
 * twice: once for the stream (stored in *@events; returns false) and
 * once for a live feed, otlp+http://... (feed.h; checked now, exits 125
 * on a malformed URL; every session opened after this feeds it; returns
 * true). */
bool session_events_option(const char *cmd, const char *dest, const char **events);
/* The help of the two options above, as `airlock run` and `airlock
 * proxy` both print it. */
#define SESSION_FEED_HELP \
	"  --events otlp+http://HOST[:PORT][/PATH]  given besides the stream's\n" \
	"                      --events: also send each receipt, as it is\n" \
	"                      written, to an OpenTelemetry collector (OTLP/HTTP\n" \
	"                      JSON logs, the OCSF events of airlock export;\n" \
	"                      port 4318 and path /v1/logs by default); what the\n" \
	"                      feed loses is recorded as receipt.gap lines\n" \
	"  --feed-queue N      lines the feed holds while the collector is down\n" \
	"                      or slow (default 10000)\n"
/* --feed-queue N: exits 125 unless 1..FEED_QUEUE_MAX. */
void session_feed_queue_option(const char *cmd, const char *arg);
/* After the options: exits 125 for a feed without a local stream (@events
 * NULL), or --feed-queue without a feed. */
void session_feed_check(const char *cmd, const char *events);

void session_open_ca(struct session *s, const char *events, const char *signing_key,
		     const struct policy *p, const char *id, const char *argv0,
		     const struct session_ca *ca);

/* A new channel to the key holder for a proxy worker (see
 * keeper_new_channel()), or -1 without a stream. Dies with 125 on
 * failure. */
int session_worker_channel(struct session *s);

/* The descriptor of the supervisor's channel, or -1: readable when the
 * key holder has something to say (its last words) or has ended. */
int session_fd(const struct session *s);

/* In a process forked or cloned from the supervisor that must not speak
 * for it (the sandbox's init): closes the supervisor's channel there. */
void session_forget(struct session *s);

/* Writes session.start (or session.refused): subject mode, capabilities,
 * pubkey, argv0. */
void session_begin(struct session *s, const char *type, enum receipt_decision d,
		   const char *rule, const char *reason);

/* Asks the key holder for a receipt and goes on without waiting for it
 * (lines are written in the order asked); takes @subject's reference.
 * Does nothing without a stream. Dies with 125 when the key holder is
 * gone: a session whose decisions cannot be recorded does not go on (a
 * stream that breaks later makes the key holder exit, which the
 * supervisor's loop sees). */
void session_record(struct session *s, const char *type, enum receipt_decision d,
		    enum receipt_point point, const char *rule, json_t *subject,
		    const char *reason);

/* Switches to @p (a reload) and writes policy.reload. */
void session_reload(struct session *s, const struct policy *p);

/* session.end will carry spend_usd: @nano nano-dollars (the session's
 * own metered spend). */
void session_set_spend(struct session *s, int64_t nano);

/* Writes session.end with @status and waits for the key holder to exit;
 * a failure is one warning on stderr. */
void session_end(struct session *s, int status);

/* The key holder was reaped with @wstatus (by the caller's wait loop):
 * the session cannot be recorded any more. Exits 125 with one line saying
 * why (the stream is left without session.end, which verify reports as
 * truncated). */
__attribute__((noreturn)) void session_lost(struct session *s, int wstatus);

/* Refuses to start: session.refused (block) instead of session.start,
 * session.end with 125, @msg on stderr, exit 125. */
__attribute__((noreturn)) void session_refuse(struct session *s, const char *rule,
					      const char *msg);

#endif /* AIRLOCK_SESSION_H */
