/* SPDX-License-Identifier: Apache-2.0
 * events.h - reading receipt streams back: the shared reader of `airlock
 * learn`, `airlock report` and `airlock export`, and the one table that
 * says what each receipt type means to them.
 *
 * A stream is verified whole first (receipt_verify_buffer), then read line
 * by line; every line says whether the verifier vouched for it. Nothing
 * here trusts a line for more than its bytes: a line that is not a JSON
 * object is still yielded (obj NULL), so that a report can show it.
 */
#ifndef AIRLOCK_EVENTS_H
#define AIRLOCK_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "receipt.h"

/* The largest EVENTS file the tools read (it is held in memory). */
#define EVENTS_FILE_MAX ((size_t)1 << 30)

/* The OCSF 1.1 classes a receipt maps to (docs/AUDIT.md). Keep
 * events_ocsf_* in sync (static_assert on the table). */
enum events_ocsf {
	EVENTS_OCSF_BASE = 0,  /* 0    Base Event */
	EVENTS_OCSF_PROCESS,   /* 1007 Process Activity */
	EVENTS_OCSF_NETWORK,   /* 4001 Network Activity */
	EVENTS_OCSF_HTTP,      /* 4002 HTTP Activity */
	EVENTS_OCSF_DNS,       /* 4003 DNS Activity */
	EVENTS_OCSF_FINDING,   /* 2004 Detection Finding */
	EVENTS_OCSF_COUNT
};

const char *events_ocsf_to_string(enum events_ocsf c); /* class name */
int events_ocsf_class_uid(enum events_ocsf c);
int events_ocsf_category_uid(enum events_ocsf c);
const char *events_ocsf_category_name(enum events_ocsf c);

/* What `airlock learn` makes of a receipt of a type. */
enum events_learn {
	EVENTS_LEARN_NONE = 0, /* nothing */
	EVENTS_LEARN_SEEN,     /* names a host the session reached */
	EVENTS_LEARN_EGRESS,   /* a block of a host and port: a host rule
				  (and, for an address check, a range);
				  the host counts as reached */
	EVENTS_LEARN_NAME,     /* a block of a name on any port (dns.block) */
	EVENTS_LEARN_ENV,      /* a dropped variable: env.pass or a secret */
	EVENTS_LEARN_REVIEW,   /* a block only a person may lift: explained,
				  never drafted */
	EVENTS_LEARN_COUNT
};

const char *events_learn_to_string(enum events_learn l);

/* Where `airlock report` shows a receipt (and the timeline's colour). */
enum events_group {
	EVENTS_GROUP_SESSION = 0,
	EVENTS_GROUP_EGRESS,
	EVENTS_GROUP_HTTP,
	EVENTS_GROUP_ENV,
	EVENTS_GROUP_SECRET,
	EVENTS_GROUP_GIT,
	EVENTS_GROUP_SPEND,
	EVENTS_GROUP_POLICY,
	EVENTS_GROUP_ERROR,
	EVENTS_GROUP_OTHER,
	EVENTS_GROUP_COUNT
};

const char *events_group_to_string(enum events_group g);

/* One receipt type. A new type is one entry of the table in events.c. */
struct events_type {
	const char *name;      /* "egress.block"; "egress." is the family
				  entry for egress types not listed; "" the
				  entry for any other type */
	const char *label;     /* for people: "Egress blocked" */
	enum events_ocsf ocsf; /* its activity class (a block is also a
				  Detection Finding) */
	enum events_learn learn;
	enum events_group group;
	int block_severity;    /* OCSF severity_id of a block (3 Medium when
				  0); a would_block is one lower */
	int block_status;      /* HTTP status airlock answers a block with
				  (0: none or unknown) */
};

/* The entry for @type: exact, else its family, else the catch-all.
 * Never NULL. */
const struct events_type *events_type_find(const char *type);

/* Every entry, for documentation and tests; *n receives the count. */
const struct events_type *events_types(size_t *n);

/* "allow" ... "info" -> enum; RECEIPT_DECISION_COUNT when unknown. */
enum receipt_decision events_decision_from_string(const char *s);

/* RFC 3339 "YYYY-MM-DDTHH:MM:SS.mmmZ" -> ms since the epoch, or -1. */
int64_t events_parse_ts(const char *ts);

/* One EVENTS file, read whole and verified. */
struct events_file {
	char *path;                        /* as given; "-" is stdin */
	char *text;                        /* its bytes (NUL-terminated) */
	size_t len;
	struct receipt_verify_result vr;   /* the verdict */
};

struct events_set {
	struct events_file *files;
	size_t nfiles;
	char *pubkey_path;                 /* --pubkey, or NULL */
};

/* Reads and verifies every file of @paths ("-" at most once: standard
 * input), against the key in @pubkey_path when not NULL. Returns 0 (each
 * file's verdict is in its vr), or -1 with a one-line reason in @err when
 * a file or the key cannot be read; @set is then freed. */
int events_load(struct events_set *set, char *const *paths, size_t npaths,
		const char *pubkey_path, char *err, size_t errlen);

void events_set_free(struct events_set *set);

/* The first file that did not verify, or NULL when all did. */
const struct events_file *events_first_failure(const struct events_set *set);

/* One line as the iterator yields it. The pointers are valid until the
 * next events_next() or events_iter_done(). */
struct events_line {
	size_t file;            /* index in set->files */
	size_t lineno;          /* 1-based, in its file */
	size_t session;         /* 0-based index of its stream, over all files */
	bool new_session;       /* the first line of that stream */
	const char *text;       /* the line's bytes, no newline, not NUL-terminated */
	size_t len;
	bool verified;          /* before its file's first bad line (a file
				   that verified: every line) */
	bool bad;               /* the line the verifier stopped at */
	json_t *obj;            /* the parsed line, or NULL (not a JSON object) */
	json_t *subject;        /* obj's subject when an object, else NULL */
	const char *subject_raw; /* the subject's bytes as signed (in text), */
	size_t subject_raw_len;  /* when subject is not NULL */
	int64_t seq;            /* -1 when absent or not an integer */
	int64_t ts_ms;          /* -1 when ts is absent or malformed */
	/* Members as strings; "" when absent or not a string. */
	const char *ts, *session_id, *type, *decision_s, *point, *rule,
		*policy, *reason, *prev;
	enum receipt_decision decision; /* RECEIPT_DECISION_COUNT if unknown */
	const struct events_type *ti;
	char sha256[65];        /* hex SHA-256 of the line's bytes */
};

struct events_iter {
	const struct events_set *set;
	size_t file, off, lineno, session;
	bool any, after_end;
	json_t *cur;
};

void events_iter_init(struct events_iter *it, const struct events_set *set);

/* Fills @ln from one line (@len bytes at @text, no newline) alone, as
 * events_next() does but for what only a file knows (file, lineno,
 * session, verified: all zero). Returns the parsed object that ln->obj
 * and its strings point into (the caller json_decref()s it), or NULL
 * when the line is not a JSON object. Used by the live feed (feed.c). */
json_t *events_line_parse(struct events_line *ln, const char *text, size_t len);

/* Fills @ln with the next line of the set (files in order); false at the
 * end. A file's trailing newline does not make an empty last line. */
bool events_next(struct events_iter *it, struct events_line *ln);

void events_iter_done(struct events_iter *it);

/* A string member of @o, or "" (absent, not an object, not a string). */
const char *events_str(const json_t *o, const char *key);

/* A number member of @o (integer or real) in *out; false when absent. */
bool events_num(const json_t *o, const char *key, double *out);

/* The keys of the JSON object @map in strcmp order, *@n of them: the
 * commands that print tables (learn, report) list in this order so that
 * their output is deterministic. The caller frees the array, not the
 * strings (they belong to @map). */
const char **events_sorted_keys(const json_t *map, size_t *n);

#endif /* AIRLOCK_EVENTS_H */
