#!/usr/bin/env python3
"""A small TCP delay relay on loopback (the kernel here has no netem).

delay_relay.py --listen PORT --to PORT --rtt-ms N [--duration S] [--max-conns K]

Accepts on 127.0.0.1:LISTEN, connects each client to 127.0.0.1:TO and
forwards both directions, delaying every chunk by N/2 ms each way. Chunks
are timestamped on arrival and released at arrival + N/2, so pipelining is
kept (like netem delay, no bandwidth limit). Loopback only; at most
--max-conns concurrent connections (extra ones are closed); exits after
--duration seconds (default 3600) whatever happens; at most 64 MiB
buffered per direction (the reader waits beyond that).
"""
import argparse
import asyncio
import sys
import time

CHUNK = 256 * 1024
MAX_QUEUED = 256  # chunks per direction: <= 64 MiB


async def pipe(reader, writer, delay):
    q = asyncio.Queue(MAX_QUEUED)

    async def rx():
        try:
            while True:
                data = await reader.read(CHUNK)
                await q.put((time.monotonic() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await q.put((time.monotonic() + delay, b""))

    async def tx():
        try:
            while True:
                due, data = await q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    t = asyncio.ensure_future(rx())
    await tx()
    t.cancel()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--rtt-ms", type=float, required=True)
    ap.add_argument("--duration", type=float, default=3600)
    ap.add_argument("--max-conns", type=int, default=8)
    a = ap.parse_args()
    delay = a.rtt_ms / 2000.0
    active = 0

    async def handle(cr, cw):
        nonlocal active
        if active >= a.max_conns:
            cw.close()
            return
        active += 1
        try:
            sr, sw = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", a.to), 10)
        except (OSError, asyncio.TimeoutError):
            active -= 1
            cw.close()
            return
        try:
            await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, delay))
        finally:
            active -= 1
            for w in (cw, sw):
                try:
                    w.close()
                except Exception:
                    pass

    srv = await asyncio.start_server(handle, "127.0.0.1", a.listen)
    print(f"delay_relay: 127.0.0.1:{a.listen} -> 127.0.0.1:{a.to}, "
          f"+{a.rtt_ms / 2:g} ms each way, for {a.duration:g} s",
          file=sys.stderr, flush=True)
    async with srv:
        try:
            await asyncio.wait_for(srv.serve_forever(), a.duration)
        except asyncio.TimeoutError:
            pass


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
