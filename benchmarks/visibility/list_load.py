#!/usr/bin/env python3
"""`tools/list` through the gateway's /mcp over a large catalog, with and without a visibility
filter in the connection URL (Python 3 stdlib only).

Starts `toolforge serve` on loopback with one stdio server, `catalog_server.py`, offering
--tools tools (default 10,000), waits for /health, then for each case opens one MCP session
(Streamable HTTP, HTTP/1.1 keep-alive) and times --requests sequential `tools/list` calls,
interleaving the cases over --rounds rounds so outside load falls on all alike:

  unfiltered      /mcp                                  every tool: the baseline
  query_search    /mcp?q=search+open+issues             BM25 search over every tool, top 20 kept
  tools_list      /mcp?tools=<50 names>                 an allow-list of 50 tools
  tags            /mcp?tags=github                      1/20 of the catalog
  disabled_tags   /mcp?disabled_tags=write              half the catalog
  header_query    /mcp, x-mcp-query on every request    as query_search, read per request

A request is timed from sending it to having read the whole reply (the client's JSON parsing is
not timed). Each response is checked (tool count as the case expects, no error); any mismatch exits 1.
Reports per case: tools per response, mean, p50 and p99 in ms, and p50 and mean as ratios to
`unfiltered` in the same run; then the server's RssAnon (anonymous resident memory).

    python3 benchmarks/visibility/list_load.py [--tools 10000] [--requests 40] [--rounds 5] [--json out.json]

The binary is $TOOLFORGE_BIN, else target/release/toolforge when built, else
target/debug/toolforge.
"""

import argparse
import http.client
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "agent"))
from chat_load import Server, build_kind, default_binary  # noqa: E402

QUERY = "search open issues"
PROTOCOL = "2025-06-18"
# The most one case may spend per round, so a run stays bounded whatever the machine.
ROUND_BUDGET_S = 6.0


def catalog_names(n):
    """The names catalog_server.py gives its tools (kept in step with it)."""
    sys.path.insert(0, HERE)
    from catalog_server import tool

    return [tool(i)["name"] for i in range(n)]


def cases(n):
    names = catalog_names(n)
    step = max(1, n // 50)
    listed = names[::step][:50]
    return [
        ("unfiltered", "/mcp", {}, lambda c: c == n),
        ("query_search", "/mcp?q=" + QUERY.replace(" ", "+"), {}, lambda c: 1 <= c <= 20),
        ("tools_list", "/mcp?tools=" + ",".join(listed), {}, lambda c: c == len(listed)),
        ("tags", "/mcp?tags=github", {}, lambda c: abs(c - n / 20) <= n / 100 + 1),
        ("disabled_tags", "/mcp?disabled_tags=write", {}, lambda c: abs(c - n / 2) <= n / 20 + 1),
        ("header_query", "/mcp", {"x-mcp-query": QUERY}, lambda c: 1 <= c <= 20),
    ]


class Session:
    """One MCP session over one keep-alive connection."""

    def __init__(self, port, path, headers):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.path = path
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        }
        self.next_id = 0
        body, response = self.post("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "list_load", "version": "1"},
        })
        self.headers["mcp-session-id"] = response.getheader("mcp-session-id")
        self.headers["mcp-protocol-version"] = PROTOCOL
        self.post("notifications/initialized", None, notification=True)

    def post(self, method, params, notification=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notification:
            self.next_id += 1
            msg["id"] = self.next_id
        self.conn.request("POST", self.path, json.dumps(msg), self.headers)
        response = self.conn.getresponse()
        body = response.read()
        if response.status >= 400:
            raise RuntimeError(f"{method}: HTTP {response.status}: {body[:300]!r}")
        return body, response

    def list_tools(self):
        """The raw reply: the caller times this, then parses it."""
        body, response = self.post("tools/list", {})
        return body, response.getheader("content-type", "")


def parse(body, content_type):
    """The JSON-RPC message of a JSON or one-event SSE response."""
    if content_type.startswith("text/event-stream"):
        data = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
        data = [d for d in data if d]
        if not data:
            raise RuntimeError(f"no data event in {body[:300]!r}")
        return json.loads(data[-1])
    return json.loads(body)


def percentile(sorted_values, p):
    i = max(1, min(len(sorted_values), int(-(-len(sorted_values) * p // 1)))) - 1
    return sorted_values[i]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=40, help="per case per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--cases", help="comma list of the cases to run (default: all)")
    args = parser.parse_args()

    binary = default_binary()
    servers = {"catalog": {
        "command": sys.executable,
        "args": [os.path.join(HERE, "catalog_server.py"), "--tools", str(args.tools)],
        "timeout": 60,
    }}
    with tempfile.TemporaryDirectory(prefix="toolforge-list-load-") as workdir:
        server = Server(binary, workdir, servers)
        try:
            server.start(timeout=120)
            table = cases(args.tools)
            if args.cases:
                table = [c for c in table if c[0] in args.cases.split(",")]
            sessions = {name: Session(server.port, path, headers) for name, path, headers, _ in table}
            times = {name: [] for name, *_ in table}
            counts = {}
            for _ in range(args.rounds):
                for name, _, _, expect in table:
                    started_round = time.monotonic()
                    for _ in range(args.requests):
                        start = time.perf_counter()
                        body, content_type = sessions[name].list_tools()
                        times[name].append(time.perf_counter() - start)
                        reply = parse(body, content_type)
                        if "error" in reply:
                            raise RuntimeError(f"{name}: {reply['error']}")
                        count = len(reply["result"]["tools"])
                        if not expect(count):
                            raise RuntimeError(f"{name}: {count} tools is not what the case expects")
                        counts[name] = count
                        if time.monotonic() - started_round > ROUND_BUDGET_S:
                            break
            rss_kb = server.proc_status("RssAnon")
        finally:
            server.stop()

    rows = []
    base = None
    for name, path, headers, _ in table:
        ts = sorted(times[name])
        row = {
            "case": name,
            "tools": counts[name],
            "requests": len(ts),
            "mean_ms": 1000 * sum(ts) / len(ts),
            "p50_ms": 1000 * percentile(ts, 0.50),
            "p99_ms": 1000 * percentile(ts, 0.99),
        }
        base = base or row
        row["p50_ratio"] = row["p50_ms"] / base["p50_ms"]
        row["mean_ratio"] = row["mean_ms"] / base["mean_ms"]
        rows.append(row)
    print(f"toolforge {build_kind(binary)} build, {args.tools} tools, "
          f"{args.rounds} rounds of {args.requests} sequential tools/list per case")
    print(f"{'case':<15} {'tools':>6} {'n':>5} {'mean ms':>9} {'p50 ms':>9} {'p99 ms':>9} "
          f"{'p50 x':>7} {'mean x':>7}")
    for r in rows:
        print(f"{r['case']:<15} {r['tools']:>6} {r['requests']:>5} {r['mean_ms']:>9.2f} "
              f"{r['p50_ms']:>9.2f} {r['p99_ms']:>9.2f} {r['p50_ratio']:>6.3f}x {r['mean_ratio']:>6.3f}x")
    if rss_kb:
        print(f"server RssAnon after the run: {rss_kb / 1024:.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"build": build_kind(binary), "tools": args.tools, "cases": rows,
                       "rss_anon_kib": rss_kb}, f, indent=2)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print(f"list_load: {e}", file=sys.stderr)
        sys.exit(1)
