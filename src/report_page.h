/* SPDX-License-Identifier: Apache-2.0
 * report_page.h - the style sheet and the script that `airlock report`
 * inlines in its page (report_page.c).
 *
 * The script expects the page cmd_report.c writes: a
 * <script type="application/json" id="airlock-data"> holding
 * {"sessions": [{"id", "file"}...], "types": [[name, label, group]...],
 * "rules": [...], "reasons": [...], "decisions": [...],
 * "rows": [[session, seq, ms, type, decision, rule, subject, reason,
 * flags, line]...]} (indices into the tables; flags: 1 not verified,
 * 2 the line verification stopped at, 4 not a JSON object), and the
 * elements #tl-view, #tl-spacer, #f-type, #f-session, #f-text,
 * #f-decisions, #tl-count, #tl-detail and #render-ms.
 */
#ifndef AIRLOCK_REPORT_PAGE_H
#define AIRLOCK_REPORT_PAGE_H

extern const char report_page_css[];
extern const char report_page_js[];

#endif /* AIRLOCK_REPORT_PAGE_H */
