#!/usr/bin/env python3
"""Toolkit benchmark over real stdio: sql_query calls/s and run_python latency (p50/p99).

Baselines measured in the same run: `tools/list` round trips (protocol floor) for sql_query,
and a bare `python3 -I -S -c pass` spawn for run_python. Figures are reported as ratios.

usage: benchmarks/toolkit/stdio_bench.py PATH/TO/toolforge [N]
"""
import json, statistics, subprocess, sys, tempfile, time, os

ALICE = ("SELECT c.name AS customer_name, o.order_id, o.quantity, p.unit_price, "
         "(o.quantity * p.unit_price) AS line_total, o.status FROM orders o JOIN customers c "
         "ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id "
         "WHERE c.name = 'Alice Nguyen'")

def main():
    exe, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    db = os.path.join(tempfile.mkdtemp(), "bench.db")
    subprocess.run([exe, "server", "toolkit", "--seed", "--db", db], check=True, stderr=subprocess.DEVNULL)
    p = subprocess.Popen([exe, "server", "toolkit", "--stdio", "--db", db], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    ids = iter(range(1, 10**9))
    def rpc(method, params=None):
        i = next(ids)
        msg = {"jsonrpc": "2.0", "id": i, "method": method}
        if params is not None:
            msg["params"] = params
        p.stdin.write(json.dumps(msg) + "\n"); p.stdin.flush()
        while True:
            r = json.loads(p.stdout.readline())
            if r.get("id") == i:
                return r
    rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); p.stdin.flush()
    def rate(f, k):
        t = time.perf_counter()
        for _ in range(k): f()
        return k / (time.perf_counter() - t)
    base = rate(lambda: rpc("tools/list"), n)
    sql = rate(lambda: rpc("tools/call", {"name": "sql_query", "arguments": {"sql": ALICE, "page_size": 25}}), n)
    def lat(f, k):
        xs = []
        for _ in range(k):
            t = time.perf_counter(); f(); xs.append((time.perf_counter() - t) * 1000)
        xs.sort()
        return statistics.median(xs), xs[int(len(xs) * 0.99) - 1]
    m = max(30, n // 5)
    py = subprocess.run(["python3", "-c", "import sys;print(sys.executable)"], capture_output=True, text=True).stdout.strip()
    bare = lat(lambda: subprocess.run([py, "-I", "-S", "-c", "pass"], check=True), m)
    run = lat(lambda: rpc("tools/call", {"name": "run_python", "arguments": {"code": "print(1 + 1)"}}), m)
    p.stdin.close(); p.wait(timeout=10)
    print(f"tools/list baseline: {base:.0f} calls/s")
    print(f"sql_query (Alice, stdio): {sql:.0f} calls/s  = {sql / base:.2f}x baseline")
    print(f"bare python3 -I -S spawn: p50 {bare[0]:.1f} ms  p99 {bare[1]:.1f} ms")
    print(f"run_python trivial (subprocess backend): p50 {run[0]:.1f} ms  p99 {run[1]:.1f} ms  = {run[0] / bare[0]:.2f}x bare spawn (p50)")

if __name__ == "__main__":
    main()
