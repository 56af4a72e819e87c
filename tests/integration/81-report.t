#!/usr/bin/env python3
# airlock report: one self-contained HTML page, read by a real browser.
# Headless Chromium opens the page; the test reads the rendered DOM for the
# verification result, the sessions, the blocks grouped by rule with their
# exact subjects, secrets, git, spend, and the timeline (virtual: only the
# rows in view exist), and proves from Chromium's own network log that
# the page makes no request (a control page that does make one is caught).
# A tampered stream still renders, saying where and why verification
# failed; receipt text that is markup stays text. A 100,000-line stream is
# rendered and its render time measured. The screenshot is kept under
# build/test-artifacts/.
import json
import os
import re
import shutil
import sys
import tempfile
import time
from html.parser import HTMLParser

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import AIRLOCK, HELPERS, SRC, T, diag, done_testing, is_, like, lines_of, mkstream, ok, run  # noqa: E402

CHROME = shutil.which("chromium") or shutil.which("chromium-browser")
ART = os.path.join(SRC, "build", "test-artifacts")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.kids = tag, dict(attrs), parent, []

    def text(self):
        return "".join(k if isinstance(k, str) else k.text() for k in self.kids)

    def walk(self):
        for k in self.kids:
            if isinstance(k, Node):
                yield k
                yield from k.walk()

    def find(self, tag=None, cls=None, **attrs):
        out = []
        for n in self.walk():
            if tag and n.tag != tag:
                continue
            if cls and cls not in n.attrs.get("class", "").split():
                continue
            if any(n.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def get(self, name):
        return self.attrs.get(name)


class DOM(HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.kids.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        c = self.cur
        while c is not self.root and c.tag != tag:
            c = c.parent
        if c is not self.root:
            self.cur = c.parent

    def handle_data(self, data):
        self.cur.kids.append(data)


def chromium(html, *extra, fragment="", netlog=None, timeout=180):
    """Runs headless Chromium on @html; returns (status, stdout, seconds).
    No request can leave: the proxy refuses everything, no name resolves,
    and the test's network namespace has only loopback."""
    prof = tempfile.mkdtemp(dir=T, prefix="chromium.")
    args = [CHROME, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-extensions",
            "--user-data-dir=" + prof, "--proxy-server=http://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND"]
    if netlog:
        args.append("--log-net-log=" + netlog)
    t0 = time.monotonic()
    st, out, err = run(*args, *extra, "file://" + html + fragment, timeout=timeout)
    return st, out.decode("utf-8", "replace"), time.monotonic() - t0


def dom_of(html, fragment="", netlog=None):
    st, out, secs = chromium(html, "--dump-dom", fragment=fragment, netlog=netlog)
    return st, DOM(out), out, secs


def page_requests(netlog):
    """URLs the page itself asked for (its frame's isolation key is
    file://), from Chromium's NetLog; Chromium's own background requests
    carry no such key."""
    d = json.load(open(netlog))
    names = {v: k for k, v in d["constants"]["logEventTypes"].items()}
    urls = set()
    for e in d["events"]:
        p = e.get("params") or {}
        if names.get(e["type"]) == "URL_REQUEST_START_JOB" and "file://" in \
                p.get("network_isolation_key", "") and not p.get("url", "").startswith("file:"):
            urls.add(p["url"])
    return sorted(urls)


# --- usage ---------------------------------------------------------------------------
st, out, err = run(AIRLOCK, "report", "--help")
is_(st, 0, "report --help: exit 0")
like(out.decode(), r"^usage: airlock report \[--pubkey FILE\] EVENTS\.\.\. -o FILE\.html", "report --help: usage")
st, out, err = run(AIRLOCK, "report", os.path.join(HELPERS, "all-types.json"))
is_(st, 2, "report without -o: usage error")
like(err.decode(), r"^airlock: report: -o FILE\.html is required", "naming what is missing")
st, out, err = run(AIRLOCK, "report", "-o", os.path.join(T, "x.html"))
is_(st, 2, "report without EVENTS: usage error")
st, out, err = run(AIRLOCK, "report", "-o", os.path.join(T, "x.html"), os.path.join(T, "nope.jsonl"))
ok(st == 2 and not os.path.exists(os.path.join(T, "x.html")), "an unreadable EVENTS file: exit 2, no page")

# --- the page ---------------------------------------------------------------------------
ev = mkstream(os.path.join(HELPERS, "all-types.json"), os.path.join(T, "all.jsonl"),
              "--pub-out", os.path.join(T, "k.pub"))
# A hostile agent chooses much of what receipts say: markup must stay text.
hostile = {"sessions": [{"session": "sess-hostile", "mode": "shadow", "argv0": "<img src=x onerror=alert(1)>",
                         "events": [{"type": "egress.block", "decision": "would_block", "rule": "egress.default",
                                     "subject": {"method": "GET", "host": "\"><img src=x onerror=alert(2)>", "port": 80},
                                     "reason": "</script><script>document.title='pwned'</script>"}],
                         "exit": 0}]}
hev = mkstream(hostile, os.path.join(T, "hostile.jsonl"))
html = os.path.join(T, "report.html")
st, out, err = run(AIRLOCK, "report", "-o", html, ev, hev)
is_(st, 0, "report of intact streams: exit 0")
page = open(html, encoding="utf-8").read()
ok(page.startswith("<!DOCTYPE html>"), "one HTML file")
like(page, r"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
     r"style-src 'sha256-[A-Za-z0-9+/=]{44}'; script-src 'sha256-[A-Za-z0-9+/=]{44}';",
     "its Content-Security-Policy allows nothing but its own style and script")
tags = re.findall(r"<[a-zA-Z][^>]*>", page)
refs = [r for t in tags for r in re.findall(r"\s(?:src|href|action|srcset|xlink:href|poster|data)\s*=\s*[\"']?([^\"' >]+)", t)]
ok(all(r.startswith("#") for r in refs), "no src or href names anything outside the page")
ok(not re.search(r"https?://|url\(|@import|<link\b|<iframe\b|<object\b|<embed\b", page),
   "no URL, @import, url() or external element anywhere in the file")

if not CHROME:
    ok(True, "# skip chromium is not installed (scripts/install-deps --test installs it)")
    done_testing()

netlog = os.path.join(T, "net.json")
st, dom, raw, secs = dom_of(html, netlog=netlog)
is_(st, 0, "headless Chromium opens the page")
diag("chromium --dump-dom: %.2f s" % secs)
is_(page_requests(netlog), [], "Chromium's network log: the page requested nothing")

v = dom.root.find(id="verification")
is_([(n.get("data-ok"), n.get("data-pinned")) for n in v], [("true", "false")],
    "verification first: intact, key not pinned")
first = [n for n in dom.root.find("section")][0]
is_(first.get("id"), "verification", "the verification result is the first section")
like(v[0].text(), r"Verified: every line is intact", "it says so in words")
like(v[0].text(), r"Key not pinned", "and that the key was not pinned")

sessions = dom.root.find("section", cls="session")
is_([(s.get("data-session"), s.get("data-mode")) for s in sessions],
    [("sess-shadow-1", "shadow"), ("sess-enforce-2", "enforce"), ("sess-hostile", "shadow")],
    "one section per session, with its mode")
s1 = sessions[0]
facts = {d.find("dt")[0].text(): d.find("dd")[0].text() for d in s1.find("dl")[0].kids
         if not isinstance(d, str) and d.find("dt")}
is_((facts.get("Command"), facts.get("Policy digest"), facts.get("Exit"), facts.get("Duration")),
    ("claude", "sha256:" + "a" * 64, "0", "18.8 s"), "its command, policy digest, exit and duration")
like(facts.get("Spend", ""), r"^\$0\.0393 of a \$0\.0500 cap$", "its spend against the cap")
counts = {tr.get("data-type"): tr.find("td", cls="num")[0].text() for tr in s1.find("table", cls="counts")[0].find("tr")}
is_((counts.get("egress.block"), counts.get("env.drop"), counts.get("vendor.future")), ("4", "2", "1"),
    "counts per type, a type this version does not know included")

blocks = {tr.get("data-rule"): tr for tr in s1.find("table", cls="blocks")[0].find("tr") if tr.get("data-rule")}
is_(sorted(blocks), sorted(["egress.default", "egress.deny[0]", "egress.special-address", "env.pass",
                            "git.repos", "secrets.anthropic.hosts", "spend.cap_usd", "spend.on_exhausted",
                            "dns.failure"]),
    "blocks and would-blocks grouped by rule")
subj = [{fl.get("data-key"): fl.find("span", cls="v")[0].text() for fl in li.find("span", cls="field")}
        for li in blocks["egress.default"].find("li")]
ok({"method": "CONNECT", "host": "registry.npmjs.org", "port": "443"} in subj and
   {"method": "GET", "host": "mirror.example.org", "port": "8080"} in subj and
   {"name": "telemetry.example.com"} in subj,
   "each rule lists the exact subjects, as fields (name, value)")
ok(all(sp.find("span", cls="field") and not sp.text().startswith("{")
       for sp in s1.find("table", cls="blocks")[0].find("span", cls="subject")),
   "no subject is shown as raw JSON: each as its fields")
like(blocks["spend.cap_usd"].text(), r'total_usd 0\.0393 cap_usd 0\.05', "numbers as the line has them")
like(blocks["egress.deny[0]"].text(), r"1 would_block", "with the count of each decision")

sec = [(tr.get("data-secret"), tr.get("data-host")) for tr in s1.find("table", cls="secrets")[0].find("tr")
       if tr.get("data-secret")]
is_(sec, [("anthropic", "api.anthropic.com"), ("anthropic", "paste.example.net")],
    "secrets used, by name and host")
like(s1.find("table", cls="secrets")[0].text(), r"would refuse ×1", "a placeholder shadow mode would refuse shows so")
git = [(tr.get("data-repo"), tr.get("data-operation")) for tr in s1.find("table", cls="git")[0].find("tr")
       if tr.get("data-repo")]
is_(git, [("acme/api", "fetch"), ("acme/api", "push"), ("acme/secrets", "fetch")], "git operations by repository")
chart = s1.find("svg", cls="spend")
is_([(c.get("data-cap"), c.get("data-points")) for c in chart], [("true", "3")], "a spend chart with its cap")
is_(len(chart[0].find("line", cls="cap")), 1, "the cap is drawn as a line")
is_(len(chart[0].find("circle", cls="refused")), 1, "and the refused call as a point")
dest = {tr.find("td")[0].text(): [td.text() for td in tr.find("td", cls="num")]
        for tr in s1.find("table", cls="dests")[0].find("tr") if tr.find("td", cls="num")}
is_([dest.get(k, [None] * 4)[1:3] for k in ("github.com", "paste.example.net", "telemetry.example.com")],
    [["1", "0"], ["1", "0"], ["1", "0"]],
    "destinations count blocks of every type: git.block, secret.block, dns.block")
is_(dest.get("api.anthropic.com", [None] * 4)[1:3], ["0", "1"], "and budget.block")
s2 = sessions[1]
like(s2.find("div", cls="session-head")[0].text(), r"exit 1", "a failed session shows its exit")

# The timeline, rendered by the page's script.
rows = dom.root.find("div", cls="row")
ok(0 < len(rows) <= 60, "the timeline renders the rows in view (%d)" % len(rows))
is_([r.get("data-seq") for r in rows[:3]], ["0", "1", "2"], "in order")
is_(rows[1].find("span", cls="c-subj")[0].text(), "name GITHUB_TOKEN", "each row's subject shown as its fields")
ok(all(not r.find("span", cls="c-subj")[0].text().startswith("{") for r in rows),
   "no row's subject is raw JSON")
is_(dom.root.find(id="tl-count")[0].text(), "showing 33 of 33 receipts", "and counts them all")
like(dom.root.find("body")[0].get("data-render-ms") or "", r"^\d+$", "the page measures its render time")

# Markup in receipts stays text.
is_(dom.root.find("title")[0].text().startswith("airlock report"), True, "no receipt changed the title")
ok(not dom.root.find("img"), "no receipt became an element (no <img>)")
hs = sessions[2]
like(hs.text(), r"<img src=x onerror=alert\(1\)>", "the hostile command is shown as text")
like(hs.find("table", cls="blocks")[0].text(), r'host "><img src=x onerror=alert\(2\)>', "and the hostile subject")

# Filters, from the link form #filter?...
st, fdom, _, _ = dom_of(html, fragment="#filter?type=egress.block&decision=would_block")
frows = fdom.root.find("div", cls="row")
ok(frows and all(r.get("data-type") == "egress.block" and r.get("data-decision") == "would_block" for r in frows),
   "filter by type and decision: only those rows")
is_(fdom.root.find(id="tl-count")[0].text(), "showing 4 of 33 receipts", "and the count follows")
st, fdom, _, _ = dom_of(html, fragment="#filter?session=sess-enforce-2&q=exfil")
is_([r.get("data-seq") for r in fdom.root.find("div", cls="row")], ["2"], "filter by session and text")

# The picture.
os.makedirs(ART, exist_ok=True)
png = os.path.join(ART, "81-report.png")
if os.path.exists(png):
    os.unlink(png)
st, out, secs = chromium(html, "--screenshot=" + png, "--window-size=1280,2000", "--hide-scrollbars")
ok(st == 0 and os.path.getsize(png) > 20000 and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
   "a screenshot (build/test-artifacts/81-report.png)")

# The detector of requests can fail: a page that loads an image is caught.
ctl = os.path.join(T, "control.html")
open(ctl, "w").write('<!DOCTYPE html><img src="http://198.18.0.99/pixel.png"><p>control</p>')
st, cdom, _, _ = dom_of(ctl, netlog=os.path.join(T, "ctl.json"))
is_(page_requests(os.path.join(T, "ctl.json")), ["http://198.18.0.99/pixel.png"],
    "control: a page that requests an image is seen in the network log")

# --- pinned key, wrong key, tampered -------------------------------------------------------
pinned = os.path.join(T, "pinned.html")
st, out, err = run(AIRLOCK, "report", "--pubkey", os.path.join(T, "k.pub"), "-o", pinned, ev)
st2, pdom, _, _ = dom_of(pinned)
is_((st, [(n.get("data-ok"), n.get("data-pinned")) for n in pdom.root.find(id="verification")]),
    (0, [("true", "true")]), "--pubkey: intact and pinned")
like(pdom.root.find(id="verification")[0].text(), r"Key pinned \(--pubkey ", "it says which key")
mkstream(os.path.join(HELPERS, "all-types.json"), os.path.join(T, "other.jsonl"), "--pub-out", os.path.join(T, "other.pub"))
st, out, err = run(AIRLOCK, "report", "--pubkey", os.path.join(T, "other.pub"), "-o", pinned, ev)
st2, pdom, _, _ = dom_of(pinned)
is_((st, pdom.root.find(id="verification")[0].get("data-ok")), (1, "false"),
    "--pubkey with another key: exit 1, the page says it does not verify")

raw_lines = lines_of(ev)
raw_lines[9] = raw_lines[9].replace(b'"metadata.example.org"', b'"metadata.example.net"', 1)
tampered = os.path.join(T, "tampered.jsonl")
open(tampered, "wb").write(b"".join(l + b"\n" for l in raw_lines))
thtml = os.path.join(T, "tampered.html")
st, out, err = run(AIRLOCK, "report", "-o", thtml, tampered)
is_(st, 1, "a tampered stream: exit 1")
like(err.decode(), r"tampered\.jsonl:10: bad signature .*\(the page shows it\)$", "stderr names the line")
st, tdom, _, _ = dom_of(thtml)
tv = tdom.root.find(id="verification")[0]
is_((tv.get("data-ok"), tv.find("tr", cls="verify-file")[0].get("data-line"),
     tv.find("tr", cls="verify-file")[0].get("data-reason").split(" (")[0]), ("false", "10", "bad signature"),
    "the page still renders, failure first: at which line and why")
like(tv.find("h1")[0].text(), r"Verification failed", "in words")
ts = tdom.root.find("section", cls="session")
is_([s.get("data-verified") for s in ts], ["false", "false"],
    "the session holding the bad line, and the one after it, are marked")
like(ts[0].find("div", cls="banner")[0].text(), r"line 10: bad signature", "with a banner naming the line")
# Figures from unverified lines are set apart, greyed and labelled; the
# ones shown as facts count only the lines that verify (lines 1-9).
uvf = ts[0].find("div", cls="unverified-figures")
is_([(u.get("data-verified"), u.find("h3")[0].text()) for u in uvf],
    [("false", "From lines 10-24, which do not verify: not facts")],
    "the bad line's session: the figures of its unverified lines set apart and labelled")
main = {st.get("class").split()[1]: st.find("b")[0].text()
        for st in ts[0].find("div", cls="stats")[0].find("div", cls="stat")}
is_((main["block"], main["would_block"]), ("0", "4"),
    "the figures shown as facts count only the verified lines (0 blocked, 4 would block)")
uvs = {st.get("class").split()[1]: st.find("b")[0].text() for st in uvf[0].find("div", cls="stat")}
is_((uvs["block"], uvs["would_block"]), ("4", "4"), "the unverified lines' own figures, inside the greyed part")
like(ts[0].find("p", cls="verified-only")[0].text(), r"count only the lines that verify", "and the page says so")
ok(re.search(r"\.unverified-figures \{[^}]*filter: grayscale\(1\)", open(thtml).read()) is not None,
   "the set-apart figures are greyed (grayscale)")
ok({st.get("class").split()[1]: st.find("b")[0].text() for st in ts[1].find("div", cls="stats")[0].find("div", cls="stat")}["block"] == "0",
   "a session wholly after the bad line shows no figure as a fact")
ok(len(ts[1].find("div", cls="unverified-figures")) == 1, "its figures are all in the greyed part")
trows = {r.get("data-seq"): r.get("class") for r in tdom.root.find("div", cls="row")}
ok("unverified" not in trows["8"] and "badline" in trows["9"] and "unverified" in trows["10"],
   "the timeline marks the bad line and every line after it")

# --- 100,000 lines ---------------------------------------------------------------------
big = os.path.join(T, "big.jsonl")
t0 = time.monotonic()
mkstream({}, big, "--synthetic", "100000", "--unsigned")
diag("100,000-line stream written in %.1f s" % (time.monotonic() - t0))
bightml = os.path.join(T, "big.html")
t0 = time.monotonic()
st, out, err = run(AIRLOCK, "report", "-o", bightml, big, timeout=600)
rsecs = time.monotonic() - t0
is_(st, 1, "a 100,000-line stream (signatures left out to keep the test short): the page is written")
diag("airlock report: %.1f s, page %.1f MB" % (rsecs, os.path.getsize(bightml) / 1e6))
st, bdom, _, secs = dom_of(bightml)
body = bdom.root.find("body")[0]
ms = int(body.get("data-render-ms") or -1)
diag("Chromium: page ready in %d ms (performance.now() at the end of the script); --dump-dom %.1f s" % (ms, secs))
ok(0 <= ms < 20000, "Chromium renders it (in %d ms)" % ms)
is_(bdom.root.find(id="tl-count")[0].text(), "showing 100,000 of 100,000 receipts", "every receipt is in the timeline")
brows = bdom.root.find("div", cls="row")
ok(0 < len(brows) <= 60, "of which only the rows in view are in the DOM (%d)" % len(brows))
done_testing()
