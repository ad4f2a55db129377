"""The proxy's httpcore network backend on asyncio (``promptslim/serve/netstream.py``), on real
sockets: bytes in order, the end of a stream, timeouts, what a connection holds unread while
its peer floods it, how a spare tells that its peer closed it or wrote to it, and TLS."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

httpcore = pytest.importorskip("httpcore")

from promptslim.serve.netstream import AsyncioBackend

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _served(handler: Handler, work: Callable[[int], Awaitable[Any]], **kw: Any) -> Any:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, **kw)
    try:
        result = await work(server.sockets[0].getsockname()[1])
        await asyncio.sleep(0.05)  # the handlers see the client's close and end
        return result
    finally:
        server.close()
        await server.wait_closed()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _read_all(stream: Any) -> bytes:
    parts = []
    while data := await stream.read(65536, timeout=5):
        parts.append(data)
    return b"".join(parts)


def test_bytes_go_both_ways_in_order_and_the_end_reads_empty() -> None:
    async def work(port: int) -> None:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        sent = bytes(range(256)) * 4096  # 1 MiB: several reads and writes
        await stream.write(sent, timeout=5)
        got = b""
        while len(got) < len(sent):
            got += await stream.read(7000, timeout=5)
        assert got == sent
        await stream.aclose()

    asyncio.run(_served(_echo, work))


def test_a_read_past_its_timeout_raises_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client goes

    async def work(port: int) -> float:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        start = time.monotonic()
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(100, timeout=0.2)
        await stream.aclose()
        return time.monotonic() - start

    assert 0.15 < asyncio.run(_served(silent, work)) < 2


def test_a_flooding_peer_is_read_no_further_than_what_is_consumed() -> None:
    flood = 32 * 1024 * 1024
    left: list[int] = []

    async def flooding(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x" * flood)
        await asyncio.sleep(0.5)  # the client reads nothing meanwhile
        left.append(writer.transport.get_write_buffer_size())
        await writer.drain()
        writer.close()

    async def work(port: int) -> bytes:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await asyncio.sleep(0.7)
        data = await _read_all(stream)
        await stream.aclose()
        return data

    data = asyncio.run(_served(flooding, work))
    # the kernel's buffers hold a few MiB at most: the rest stayed with the sender, so the
    # client held only what it was about to read
    assert left and left[0] > flood // 2
    assert len(data) == flood and data.count(b"x") == flood


@pytest.mark.parametrize("peer", ["writes", "closes"])
def test_a_connection_whose_peer_wrote_or_closed_first_reads_as_readable(peer: str) -> None:
    async def early(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if peer == "writes":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            await reader.read()
        writer.close()

    async def check(port: int) -> bool:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await asyncio.sleep(0.2)
        readable = bool(stream.get_extra_info("is_readable"))
        if peer == "closes":
            with pytest.raises(httpcore.WriteError):
                await stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=5)
        await stream.aclose()
        return readable

    assert asyncio.run(_served(early, check)) is True


def test_a_connection_nobody_wrote_to_reads_as_not_readable() -> None:
    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def check(port: int) -> bool:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await asyncio.sleep(0.2)
        readable = bool(stream.get_extra_info("is_readable"))
        await stream.aclose()
        return readable

    assert asyncio.run(_served(quiet, check)) is False


def test_connecting_where_nothing_listens_raises_connect_error() -> None:
    async def work() -> None:
        server = await asyncio.start_server(_echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(httpcore.ConnectError):
            await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)

    asyncio.run(work())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_is_started_on_a_connection(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    client_side = ssl.create_default_context(cafile=str(cert))

    async def work(port: int) -> tuple[bytes, bool]:
        plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        stream = await plain.start_tls(client_side, server_hostname="localhost", timeout=5)
        await stream.write(b"over tls", timeout=5)
        got = await stream.read(100, timeout=5)
        secured = stream.get_extra_info("ssl_object") is not None
        await stream.aclose()
        return got, secured

    assert asyncio.run(_served(_echo, work, ssl=server_side)) == (b"over tls", True)
