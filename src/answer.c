/* SPDX-License-Identifier: Apache-2.0
 * answer.c - records verdicts and applies them to a connection.
 *
 * DOC: Theory of Operation
 *
 * Every decision of the proxy ends here, in answer_apply():
 *
 *   ALLOW  nothing to do yet: the allow receipt is written when the
 *          upstream is reached (answer_record_allow), with the address
 *          actually connected to;
 *   DENY   recorded (egress.block unless the verdict names another type);
 *          in shadow mode a DENY that is not marked always becomes
 *          would_block and the request goes on;
 *   FAIL   recorded as proxy.error (decision block in every mode):
 *          nothing can be forwarded;
 *   CLOSE  no receipt: the connection ends.
 *
 * A DENY or FAIL that goes no further is answered (status, X-Airlock-Rule,
 * X-Airlock-Receipt, a one-line body) when the client still speaks HTTP
 * with the proxy and no response is half-written; otherwise the connection
 * is closed (inside a tunnel after its 200, in the middle of a response).
 * The answer is queued after any complete output already queued (an
 * interim 1xx, an earlier pipelined response) so that it never splits a
 * message. The mode is the one of the policy the request was decided
 * under, not of a policy loaded since.
 */
#include "answer.h"

#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "util.h"

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 429: return "Too Many Requests";
	case 502: return "Bad Gateway";
	default: return "Error";
	}
}

static void add_rule_text(json_t *s, const struct host_rule *r)
{
	char text[HOSTNAME_MAX + 64];

	if (!r)
		return;
	host_rule_format(r, text, sizeof(text));
	json_object_set_new(s, "rule", json_string(text));
}

static const struct policy *policy_of(const struct conn *c)
{
	return c->policy ? c->policy : c->p->policy;
}

/* The answer's one-line body: what was refused and why. */
static void answer_body(const struct conn *c, const struct verdict *v, char *out,
			size_t len)
{
	size_t i, n;

	if (!c->target_known)
		snprintf(out, len, "airlock: %s", v->reason);
	else if (c->inner)
		/* A request inside a tunnel: the connection's method is the
		 * tunnel's CONNECT, not the refused request's. */
		snprintf(out, len, "airlock: %s a request to %s:%u: %s",
			 v->action == VERDICT_DENY ? "denied" : "failed", c->target.name,
			 c->port, v->reason);
	else if (v->action == VERDICT_DENY)
		snprintf(out, len, "airlock: denied %s %s:%u: %s", c->method,
			 c->target.name, c->port, v->reason);
	else
		snprintf(out, len, "airlock: %s %s:%u: %s", c->method,
			 c->target.name, c->port, v->reason);
	/* One line: no CR, LF or other control byte from a reason. */
	n = strlen(out);
	for (i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = ' ';
}

/* The answer's last line, the same for every refusal: an agent that
 * reads "403" tends to try another way out; this says there is none. */
#define ANSWER_ROUTES \
	"Other routes (--noproxy, direct sockets, other ports) are refused too; " \
	"a policy change is the only way.\n"

void answer_text(const struct conn *c, const struct verdict *v, int64_t seq,
			 struct buf *text)
{
	char body[VERDICT_REASON_MAX + HOSTNAME_MAX + 64];
	char receipt[24];

	answer_body(c, v, body, sizeof(body));
	if (seq >= 0)
		snprintf(receipt, sizeof(receipt), "%lld", (long long)seq);
	else
		snprintf(receipt, sizeof(receipt), "none");
	/* Short plain text a model can act on: what was refused and why,
	 * the rule and the receipt, and that no other route is open. */
	buf_printf(text, "%s\nrule: %s; receipt: %s\n" ANSWER_ROUTES, body,
		   v->rule[0] ? v->rule : "none", receipt);
}

static void answer_write(struct conn *c, const struct verdict *v, int64_t seq)
{
	char receipt[24];
	struct buf b = { 0 };
	struct buf text = { 0 };

	answer_text(c, v, seq, &text);
	if (seq >= 0)
		snprintf(receipt, sizeof(receipt), "%lld", (long long)seq);
	else
		snprintf(receipt, sizeof(receipt), "none");
	buf_printf(&b,
		   "HTTP/1.1 %d %s\r\nX-Airlock-Rule: %s\r\nX-Airlock-Receipt: %s\r\n"
		   "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
		   "Connection: close\r\n\r\n",
		   v->status, status_text(v->status), v->rule, receipt, text.len);
	buf_append(&b, text.data, text.len);
	buf_free(&text);
	conn_answer(c, &b);
	buf_free(&b);
}

bool answer_record(struct conn *c, struct verdict *v, int64_t *seq)
{
	const struct policy *pol = policy_of(c);
	enum receipt_decision d = RECEIPT_BLOCK;
	const char *type = v->type;
	json_t *s = NULL;

	*seq = -1;
	switch (v->action) {
	case VERDICT_ALLOW:
		verdict_clear(v);
		return true;
	case VERDICT_CLOSE:
		verdict_clear(v);
		return false;
	case VERDICT_DENY:
		if (pol->mode == POLICY_MODE_SHADOW && !v->always)
			d = RECEIPT_WOULD_BLOCK;
		s = c->target_known ? conn_subject(c) : json_object();
		add_rule_text(s, v->host_rule);
		if (!type)
			type = "egress.block";
		break;
	case VERDICT_FAIL:
	case VERDICT_ACTION_COUNT:
	default:
		s = c->target_known ? conn_subject(c) : json_object();
		json_object_set_new(s, "error", json_string(v->reason));
		if (!type)
			type = "proxy.error";
		break;
	}
	ASSERT(s);
	if (v->extra)
		json_object_update(s, v->extra);
	verdict_clear(v);
	*seq = conn_record_at(c, v->point, type, d, v->rule, s, v->reason);
	if (d == RECEIPT_WOULD_BLOCK) {
		c->shadowed = true;
		return true;
	}
	return false;
}

bool answer_apply(struct conn *c, struct verdict *v)
{
	int64_t seq;

	if (v->action == VERDICT_CLOSE) {
		verdict_clear(v);
		conn_close(c);
		return false;
	}
	if (answer_record(c, v, &seq))
		return true;
	if (v->status && conn_can_answer(c))
		answer_write(c, v, seq);
	else
		conn_close(c);
	return false;
}

void answer_record_allow(struct conn *c, json_t *extra)
{
	char text[ADDR_STRLEN];
	json_t *s;

	if (c->shadowed || c->allow_recorded) {
		json_decref(extra);
		return; /* its would_block receipt already tells the story */
	}
	c->allow_recorded = true;
	s = conn_tunnel_subject(c); /* the connection's decision, once */
	addr_format(&c->addr, text, sizeof(text));
	json_object_set_new(s, "address", json_string(text));
	add_rule_text(s, c->rule);
	if (extra)
		json_object_update(s, extra);
	json_decref(extra);
	conn_record(c, "egress.allow", RECEIPT_ALLOW, c->rule_id, s,
		    policy_of(c)->mode == POLICY_MODE_OFF ? "mode off: not checked"
							  : "allowed");
}
