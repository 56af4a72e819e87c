/* SPDX-License-Identifier: Apache-2.0
 * filter.h - the hooks of the HTTP exchange: where secret substitution,
 * git rules, spend metering and response scrubbing plug in.
 *
 * A filter is a table of operations (struct filter_ops). For every request
 * the exchange asks each filter, in table order, whether it applies
 * (attach); the ones that do see, in this order:
 *
 *   request_head   the parsed head, as copied fields with an editable
 *                  header list; may rewrite headers, ask for the whole
 *                  body before anything is forwarded, give a verdict, or
 *                  answer FILTER_PENDING;
 *   request_body   each decoded body slice (read-only), or, when a filter
 *                  asked for it, the whole body once (replaceable: the
 *                  exchange then rewrites the framing); may give a
 *                  verdict or pend;
 *   response_interim  each interim head (1xx, the 101 of an upgrade):
 *                  editable reason phrase and headers;
 *   response_head  the parsed response head (editable reason phrase and
 *                  headers); may install a body transform, or pend
 *                  (where filter_response.can_wait says it may);
 *   upgraded       after a 101: may install a transform of every byte
 *                  the upstream sends from then on (WebSocket frames);
 *   response_trailers  HTTP/2 trailers (h2.c), editable;
 *   response_body  each decoded body slice; a transform writes the bytes
 *                  to send instead (any length: the exchange re-frames
 *                  the response, chunked to an HTTP/1.1 client, else
 *                  delimited by close);
 *   done           the exchange is over, with its outcome (so that
 *                  metering can settle); the filter frees its state.
 *
 * Every pointer a hook receives is valid only during the call, but for
 * the struct filter_request itself: it stays valid until done, and a
 * filter that asked for the whole body may still edit its headers and
 * target from request_body (the head is sent after). Fields are copies,
 * never slices of a buffer that moves. Hooks run on the event
 * loop and must not block: a hook that needs another process (a spend
 * reservation, a leaf certificate) starts the request, keeps the
 * struct filter_ref it was given, answers FILTER_PENDING, and later calls
 * proxy_resume() with the result (from a callback of the same loop, see
 * proxy_watch()). While it is pending the exchange reads nothing more.
 * A response hook pends the same way (response_head, or response_body at
 * the last slice, where filter_response.can_wait): the hook that pended
 * is called again once resumed with FILTER_CONTINUE (response_head with
 * the same response; response_body with no bytes, @last true, to write
 * the rest of its output), a FILTER_VERDICT is applied instead.
 */
#ifndef AIRLOCK_FILTER_H
#define AIRLOCK_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "buf.h"
#include "hostname.h"
#include "http.h"
#include "receipt.h"
#include "verdict.h"

/* Keep filter_result_to_string() in sync. */
enum filter_result {
	FILTER_CONTINUE = 0, /* go on with the next filter */
	FILTER_VERDICT,      /* the verdict filled in is applied (a DENY in
				shadow mode goes on as would_block) */
	FILTER_PENDING,      /* wait for proxy_resume() */
	FILTER_RESULT_COUNT
};

const char *filter_result_to_string(enum filter_result r);

/* Keep filter_outcome_to_string() in sync. */
enum filter_outcome {
	FILTER_OUTCOME_COMPLETE = 0, /* the whole response reached the client */
	FILTER_OUTCOME_CUT,          /* the response started but was cut */
	FILTER_OUTCOME_UPSTREAM_ERROR, /* no (valid) response: an error answer
					  or a close instead */
	FILTER_OUTCOME_CLIENT_GONE,  /* the client left first */
	FILTER_OUTCOME_REFUSED,      /* a verdict refused the request */
	FILTER_OUTCOME_COUNT
};

const char *filter_outcome_to_string(enum filter_outcome o);

/* An editable list of header fields (name and value are NUL-terminated
 * copies owned by the list). The framing headers (Content-Length,
 * Transfer-Encoding) and the hop-by-hop ones are not in it: the exchange
 * writes those itself. */
struct filter_header {
	char *name;
	char *value;
};

struct filter_headers {
	size_t count, cap;
	struct filter_header *h;
};

/* Index of the first header at index >= @from named @name
 * (case-insensitive), or -1. */
int filter_headers_find(const struct filter_headers *hs, const char *name,
			size_t from);
/* The value of the first @name, or NULL. */
const char *filter_headers_get(const struct filter_headers *hs,
			       const char *name);
void filter_headers_add(struct filter_headers *hs, const char *name,
			const char *value);
/* Replaces every @name by one field @name: @value (added if absent). */
void filter_headers_set(struct filter_headers *hs, const char *name,
			const char *value);
/* Removes every @name; returns how many. */
size_t filter_headers_remove(struct filter_headers *hs, const char *name);
void filter_headers_free(struct filter_headers *hs);

struct policy;

struct filter_request {
	const struct policy *policy;     /* the policy the request is decided
					    under (set before attach) */
	const char *method;              /* as sent, case preserved */
	const struct host_target *host;  /* the target (normalised): inside a
					    tunnel the connection's (the
					    CONNECT target, the transparent
					    connection's original
					    destination), never the Host
					    header's */
	uint16_t port;                   /* likewise the connection's port */
	const struct host_target *named_host; /* what the Host header names
					    (differs from host only when a
					    mismatch goes on in shadow mode):
					    it may narrow where a value goes,
					    never widen it */
	uint16_t named_port;             /* the Host header's port, or port
					    when it names none */
	bool named_port_explicit;        /* the Host header names a port (the
					    Host field sent upstream is
					    named_host[:named_port]) */
	const char *path;                /* "/" at least */
	const char *query;               /* after '?', or NULL: none */
	struct filter_headers headers;   /* editable */
	enum http_body body;             /* NONE, LENGTH or CHUNKED */
	uint64_t content_length;         /* when LENGTH */
	bool inner;                      /* origin-form inside a tunnel whose
					    target is fixed (CONNECT host) */
	bool client_tls;                 /* the client endpoint is TLS */
	bool upgrade;                    /* the request asks to change
					    protocol (Upgrade, e.g. to a
					    WebSocket; a hop-by-hop header,
					    so not in @headers) */
	char *target;                    /* NULL, or the request-target to
					    send upstream instead of
					    path[?query]: a request_head hook
					    may set it (malloc'd; the exchange
					    frees it, a later hook may
					    replace it) */
};

struct filter_response {
	unsigned int status;
	char *reason;                    /* the reason phrase (malloc'd,
					    editable: a hook that replaces it
					    frees the old one) */
	struct filter_headers headers;   /* editable */
	enum http_body body;             /* as the upstream framed it */
	uint64_t content_length;
	bool replayable;                 /* the exchange can send the request
					    again instead of relaying this
					    answer (filter_transform.retry):
					    HTTP/1.1 over a connection the
					    upstream keeps, the request's body
					    none or read whole, and not sent
					    again already */
	bool can_wait;                   /* response_head may answer
					    FILTER_PENDING, response_body 1
					    at the last slice (HTTP/1.1,
					    exchange.c; not h2.c) */
};

/* What a request-head hook may ask of the exchange. */
struct filter_asks {
	bool whole_body;        /* deliver the whole request body to
				   request_body once, before anything is
				   forwarded */
	uint64_t max_body;      /* its bound (0: 32 MiB); over it: 413 */
};

/* What a response-head hook may ask. */
struct filter_transform {
	bool enabled;           /* response_body writes the bytes to send */
	bool keeps_length;      /* ... exactly as many as it is given, in
				   total: a Content-Length stays valid and
				   the response keeps it */
	bool hold_head;         /* the head waits for the transform's first
				   bytes (or its end): a cut before then is
				   answered 502 instead of closing, with
				   this rule and reason (valid until done) */
	const char *hold_rule, *hold_reason;
	bool retry;             /* only when the answer is replayable: it is
				   read and dropped, no later filter sees it,
				   and the request (its head as the filters
				   left it, edited by this hook if need be)
				   goes again on the same connection; the
				   filters see the next answer's head */
};

/* A transform of the bytes an upstream sends after a 101 (the upgraded
 * connection, e.g. WebSocket frames), installed by the upgraded hook. */
struct filter_stream {
	/* Appends to @out what the client gets for @len more bytes. Returns
	 * 0, or -1 to close the connection (nothing more is relayed). */
	int (*feed)(struct filter_stream *fs, const char *in, size_t len,
		    struct buf *out);
	/* The connection ended; frees @fs. */
	void (*free)(struct filter_stream *fs);
};

/* Names one exchange for proxy_resume(). */
struct filter_ref {
	uint32_t index, gen, seq;
};

/* The loop a filter that pends lives in, as calls (the proxy's:
 * proxy_filter_loop()), so that a filter needs nothing of the proxy's
 * own modules. Each has the meaning of the proxy_* call of its name
 * (proxy.h); @ctx is the loop's. */
struct filter_loop {
	void *ctx;
	/* proxy_resume(): resumes the exchange @ref names; 0 or -ESTALE */
	int (*resume)(void *ctx, const struct filter_ref *ref, int r, struct verdict *v);
	/* proxy_watch(): @fn runs when @fd is ready, until unwatch */
	int (*watch)(void *ctx, int fd, uint32_t events,
		     void (*fn)(void *arg, int fd, uint32_t events), void *arg);
	void (*unwatch)(void *ctx, int fd);
	/* proxy_set_tick(): @fn runs on every turn of the loop */
	void (*set_tick)(void *ctx, int (*fn)(void *arg, uint64_t now_ms), void *arg);
};

struct filter_stats {
	unsigned int status;     /* the final status relayed (0: none) */
	uint64_t bytes_up;       /* request body bytes forwarded */
	uint64_t bytes_down;     /* response body bytes sent to the client */
};

struct filter_ops {
	const char *name;
	/* Returns the filter's state for this exchange, or NULL when it does
	 * not apply. @arg is the filter's registration argument. */
	void *(*attach)(void *arg, const struct filter_request *rq);
	enum filter_result (*request_head)(void *st, struct filter_request *rq,
					   struct filter_asks *asks,
					   struct filter_ref ref,
					   struct verdict *v);
	/* Streaming: @data is one decoded slice, @last is true once (with
	 * len 0 possible). Whole body (asks->whole_body): called once with
	 * @body holding it all and @last true; the hook may rewrite @body. */
	enum filter_result (*request_body)(void *st, const char *data, size_t len,
					   bool last, struct buf *body,
					   struct filter_ref ref,
					   struct verdict *v);
	enum filter_result (*response_head)(void *st,
					    struct filter_response *rs,
					    struct filter_transform *tf,
					    struct verdict *v);
	/* Decoded slice @data; with a transform the hook appends the bytes
	 * to send to @out (@out is NULL without one). Returns 0, or -1 to
	 * cut the response (the exchange closes). A gRPC answer over h2
	 * (h2.c) is given one whole message a call, each with @last true:
	 * a transform then holds nothing back past the message's end, and
	 * is fed again with the next. Where the response's can_wait, a
	 * transform may return 1 at the last slice: the exchange pends (the
	 * head and the end wait) until proxy_resume(). */
	int (*response_body)(void *st, const char *data, size_t len, bool last,
			     struct buf *out);
	/* The request leaves: its head is queued to the upstream (every
	 * filter has let it go; none is pending). Called at most once; a
	 * request refused or failed before it left never gets it, so what
	 * a filter did to a request that never left can go unrecorded.
	 * May be NULL. */
	void (*request_sent)(void *st);
	/* An interim head (1xx, the 101 of an upgrade included): reason
	 * and headers editable (for the 101 the hop-by-hop ones are in the
	 * list too: the client needs Upgrade and Connection). */
	void (*response_interim)(void *st, struct filter_response *rs);
	/* After the 101 head: a transform of everything the upstream sends
	 * from then on, or NULL. At most one filter may return one (a second
	 * closes the connection). */
	struct filter_stream *(*upgraded)(void *st);
	/* HTTP/2 trailers (gRPC's grpc-status, grpc-message) before they are
	 * relayed to the client: editable like a head's headers. May be
	 * NULL. */
	void (*response_trailers)(void *st, struct filter_headers *trailers);
	/* HTTP/2 request trailers (@rq is the request, its headers as
	 * sent), before they go upstream: editable like the head's headers;
	 * a verdict resets the stream (its body has gone already) and the
	 * trailers are not sent. Without the hook a filter passes them. May
	 * be NULL. */
	enum filter_result (*request_trailers)(void *st, const struct filter_request *rq,
					       struct filter_headers *trailers,
					       struct verdict *v);
	/* Always called once per attached state; frees it. */
	void (*done)(void *st, enum filter_outcome outcome,
		     const struct filter_stats *stats);
	/* Must the requests to @t on @port (on any port when @any_port: a
	 * leaf is issued per host) be seen in clear for this filter to do
	 * its job under @p? intercept.c opens a CONNECT tunnel when a filter
	 * of filter_table says yes. NULL: never. */
	bool (*needs_cleartext)(const struct policy *p, const struct host_target *t,
				uint16_t port, bool any_port);
};

/* --- the filter table: one registration per filter ---------------------------
 *
 * A filter is registered once, as a struct filter_def in its own file,
 * named in filter_table (src/filter_table.c) in the order the exchange
 * runs it.
 * The table is all that worker.c and intercept.c know of the filters:
 *
 *  - the supervisor sends each worker, for each filter in the table's
 *    order, one MSG_FILTER_CONFIG: the filter's name and the block its
 *    config_put wrote from the supervisor's holdings (struct
 *    filter_source);
 *  - the worker makes each filter from its block (make), in the same
 *    order, registers the ones that run here with its proxy, and hands
 *    later blocks of the same filter to configure;
 *  - intercept.c asks needs_cleartext of every filter's ops.
 *
 * A block is fields in msg.c's encoding (msg_put_*, read back with
 * msg_get_*): the filter's own format, which no other file reads. */

struct msg;
struct msg_reader;
struct registry;
struct broker;
struct gitcred;
struct spendd;

/* What the supervisor holds that the filters are configured from; each
 * filter's config_put takes its own part. (A filter configured from
 * something the supervisor does not hold yet adds it here.) */
struct filter_source {
	const struct policy *policy;  /* the policy at start */
	const struct broker *broker;  /* the brokered secrets, or NULL */
	const struct gitcred *git;    /* the git credential (gitcred.h), or
					 NULL */
	struct spendd *spend;         /* the ledger process, or NULL: nothing
					 is metered */
};

/* What a worker offers each filter it makes: its receipts, and its
 * channel to the supervisor. @arg is every hook's. */
struct filter_env {
	const struct policy *policy;  /* the policy at start */
	int64_t (*record)(void *arg, const char *type, enum receipt_decision d,
			  enum receipt_point point, const char *rule, json_t *subject,
			  const char *reason);
	void *arg;
	/* The registry of every value the proxy injects (registry.h), to be
	 * scrubbed from every answer: the secrets filter's, set when it is
	 * made (it comes before every filter that injects a value). */
	struct registry *registry;
	/* For the secrets filter (secretfilter.h): a captured value to every
	 * other worker, what the supervisor queued, a 401 to an OAuth token
	 * (the two questions only send: 0, or -1 when they cannot; the
	 * supervisor's answer comes through the worker's loop). */
	int (*announce)(void *arg, const char *secret, time_t expires, const char *value,
			size_t len, const char *ph, size_t phlen);
	void (*sync)(void *arg);
	int (*oauth401)(void *arg, const char *secret, const char *value, size_t len,
			bool wait);
	/* For the spend filter: a call was refused for the cap under
	 * on_exhausted "stop". */
	void (*exhausted)(void *arg, const char *reason);
};

/* The largest block a filter's configuration may be (a block too big for
 * one message travels in a sealed memfd). */
#define FILTER_CONFIG_MAX ((size_t)16 * 1024 * 1024)

struct filter_def {
	const char *name;             /* the ops' name */
	const struct filter_ops *ops;
	/* Supervisor, once per worker: writes the filter's block from @src
	 * into @blk (msg_put_*), and in *@fd a descriptor of the filter's to
	 * pass along (the caller closes its copy once sent), or leaves it -1.
	 * Returns 0, or -1 with one line in @err. NULL: an empty block. */
	int (*config_put)(const struct filter_source *src, struct msg *blk, int *fd,
			  char *err, size_t errlen);
	/* Worker, before it is confined: the filter made from its first
	 * block @blk (every field to be read, msg_end() included) and @fd
	 * (the filter's now, or -1): the argument to register with the
	 * proxy, or NULL: with @err empty when the filter has nothing to do
	 * in this session (no secret of its kind, nothing metered), else
	 * with one line in @err (the worker stops). */
	void *(*make)(struct filter_env *env, struct msg_reader *blk, int fd, char *err,
		      size_t errlen);
	/* Worker: a later block (the supervisor sends one when the filter's
	 * configuration changes: the git token's refresh). Returns 0, or -1
	 * with one line in @err (the worker stops). NULL: none comes. */
	int (*configure)(void *f, struct msg_reader *blk, int fd, char *err, size_t errlen);
	/* Worker, once its proxy is made: starts what the filter watches in
	 * the proxy's loop (proxy_filter_loop()). Returns 0 or -errno. May be
	 * NULL. */
	int (*start)(void *f, const struct filter_loop *loop);
};

/* The filters, in the order the exchange runs them. */
extern const struct filter_def *const filter_table[];
extern const size_t filter_table_len;

/* The entry of filter_table named @name (@len bytes), or NULL. */
const struct filter_def *filter_table_find(const char *name, size_t len);

/* Does any filter of filter_table need @t on @port in clear under @p? */
bool filter_table_needs_cleartext(const struct policy *p, const struct host_target *t,
				  uint16_t port, bool any_port);

/* For needs_cleartext hooks: is @t one of the @n names (never an IP
 * literal)? Is it matched by one of the @n rules, on @port as
 * egress.allow reads it, or on any port when @any_port? */
bool filter_host_named(char *const *names, size_t n, const struct host_target *t);
struct host_rule;
bool filter_host_ruled(const struct host_rule *rules, size_t n, const struct policy *p,
		       const struct host_target *t, uint16_t port, bool any_port);

/* A filter as registered with the proxy. */
struct filter_reg {
	const struct filter_ops *ops;
	void *arg;
};

#define FILTER_MAX 8 /* filters one proxy may have */

/* The whole request body a filter reads when it names no bound. */
#define FILTER_WHOLE_BODY_DEFAULT ((uint64_t)32 * 1024 * 1024)

/* The filters attached to one exchange, and where the request stands
 * among them: the one calling sequence of exchange.c (HTTP/1.1) and h2.c
 * (each stream). */
struct filter_chain {
	struct {
		const struct filter_ops *ops;
		void *st;
	} f[FILTER_MAX];
	size_t n;    /* attached */
	size_t next; /* the one to run next */
};

/* Attaches every registered filter that wants the request @rq. */
void filter_chain_attach(struct filter_chain *ch, const struct filter_reg *regs, size_t nregs,
			 const struct filter_request *rq);

/* Runs request_head (or, with @whole, request_body on the whole body)
 * of the filters from ch->next on. Returns FILTER_CONTINUE once every one
 * let the request go (ch->next is 0 again); FILTER_PENDING when the one
 * at ch->next waits (its verdict comes to the caller's resume, which then
 * moves ch->next on and calls again); FILTER_VERDICT when the one at
 * ch->next decided other than allow: *@v to be recorded, and when the
 * exchange goes on anyway (shadow mode) the caller moves ch->next on and
 * calls again. @asks (heads only, may be NULL) gathers what was asked:
 * the whole body, and the smallest bound named (FILTER_WHOLE_BODY_DEFAULT
 * for none). */
enum filter_result filter_chain_request(struct filter_chain *ch, struct filter_request *rq,
					struct buf *whole, struct filter_ref ref,
					struct filter_asks *asks, struct verdict *v);

/* One streamed request body slice (read-only) through the filters from
 * *@i on; the results as filter_chain_request(), *@i naming the filter
 * that waits or decided (a filter cannot wait in the middle of a body:
 * the caller fails the request on FILTER_PENDING). */
enum filter_result filter_chain_slice(struct filter_chain *ch, size_t *i, const char *d,
				      size_t n, bool last, struct filter_ref ref,
				      struct verdict *v);

#endif /* AIRLOCK_FILTER_H */
