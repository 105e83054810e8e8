"""Streaming HTTP responses on waitress, shared by the API's log proxy and the
agent's log server (plain: no server-side imports, the agent uses it too).

- `expose_write`: WSGI middleware so a stream can send its headers before its first
  chunk (waitress, per PEP 3333, sends them with the first non-empty chunk only).
- `pump`: read a source in a helper thread and yield its chunks, stopping when the
  reader went away (a blocked read cannot be interrupted otherwise).
- `StreamBroken`, `abort_response`: a broken source breaks the response too, so the
  reader sees a broken stream (and resumes) rather than a clean end.
- `response_chunks`: the chunks of a streamed `requests` response as they arrive.
- `stop_waitress_server`: close a waitress server and every open stream at once.
"""
import queue
import threading

POLL_SECONDS = 1.0        # how often an idle stream checks that its reader is still there
QUEUE_CHUNKS = 256        # chunks buffered between the reader thread and the HTTP writer
WRITE_KEY = "shepherd.write"   # environ key of the server's write callable
_END = object()


def expose_write(wsgi_app):
    """Puts the server's `write` callable (returned by start_response) in
    environ[WRITE_KEY]."""
    def app(environ, start_response):
        def recording_start_response(status, headers, exc_info=None):
            write = start_response(status, headers, exc_info)
            environ[WRITE_KEY] = write
            return write
        return wsgi_app(environ, recording_start_response)
    return app


class StreamBroken(Exception):
    """The source of a stream failed (not a clean end)."""


def abort_response(message):
    """An exception that makes waitress drop the connection without the stream's final
    chunk, and without a traceback in its log (ClientDisconnected is an expected end)."""
    try:
        from waitress.channel import ClientDisconnected
    except ImportError:  # pragma: no cover - another WSGI server: any exception aborts
        ClientDisconnected = ConnectionAbortedError
    return ClientDisconnected(message)


def pump(iterator, gone, on_stop=None, poll=POLL_SECONDS, name="stream-pump"):
    """Yield the chunks of `iterator` (read by a helper thread) until it ends or
    `gone()` says the reader went away (checked every `poll` seconds while idle);
    then `on_stop()`, which may close the source. The helper thread stops at its next
    chunk. A failing source raises StreamBroken (after the chunks read before)."""
    q = queue.Queue(QUEUE_CHUNKS)
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=poll)
                return True
            except queue.Full:
                continue
        return False

    def run():
        try:
            for chunk in iterator:
                if stop.is_set() or not put(chunk):
                    break
        except Exception as exc:  # noqa: BLE001 - handed to the writer, which aborts
            if not stop.is_set():
                put(StreamBroken("%s: %s" % (type(exc).__name__, exc)))
        finally:
            put(_END)
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        while True:
            try:
                item = q.get(timeout=poll)
            except queue.Empty:
                if gone():
                    return
                continue
            if item is _END:
                return
            if isinstance(item, StreamBroken):
                raise item
            if item:
                yield item
    finally:
        stop.set()
        if on_stop is not None:
            try:
                on_stop()
            except Exception:  # noqa: BLE001
                pass


def response_chunks(resp, decode_content=True):
    """The body of a `requests` response (stream=True) as it arrives, chunk by chunk
    (iter_content would wait to fill its buffer). A proxy passes bytes through as
    they are: decode_content=False."""
    raw = resp.raw
    if getattr(raw, "chunked", False) and raw.supports_chunked_reads():
        yield from raw.read_chunked(None, decode_content=decode_content)
        return
    while True:
        data = raw.read1(65536) if hasattr(raw, "read1") else raw.read(65536)
        if not data:
            return
        yield data


def stop_waitress_server(server, timeout=5.0):
    """Close the listening socket and every connection of a waitress server running in
    a thread (open streams break mid-stream), stop its workers, then its trigger. The
    closing runs on the server's own loop thread (through the trigger), as waitress
    requires; the trigger itself goes last, since workers pull it when they finish."""
    from waitress import wasyncore

    closed = threading.Event()

    def close_connections():
        for disp in list(server._map.values()):
            if disp is server.trigger:
                continue
            try:
                if disp is server:
                    wasyncore.dispatcher.close(server)
                else:
                    disp.close()
            except OSError:
                pass
        closed.set()

    server.trigger.pull_trigger(close_connections)
    closed.wait(timeout)
    try:
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout)
    except Exception:  # noqa: BLE001
        pass

    def close_trigger():
        server.trigger._physical_pull = lambda: None
        server.trigger.close()

    server.trigger.pull_trigger(close_trigger)
