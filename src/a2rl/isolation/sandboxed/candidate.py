"""The untrusted process of a code check: runs the program, then answers calls of its entry
point until the checker closes the calls pipe. Nothing here is trusted: a program can change all
of it.

Standard library only: the sandbox runs ``plaindata.py``, ``common.py`` and this text as one
program (``python -c``, so ``__name__`` is ``__main__``); the imports below are for tests and
linters, which import it as a module.
"""
import builtins
import os

if __name__ != "__main__":
    from a2rl.isolation.plaindata import decode, encode, read_frame, write_frame
    from a2rl.isolation.sandboxed.common import describe, read_job


def _send(fd, message):
    try:
        text = encode(message)
    except BaseException as err:
        text = encode(("unsendable", describe(err)[1]))
    write_frame(fd, text)


def _candidate_main():
    job = read_job()
    calls, replies = job["calls"], job["replies"]
    _send(replies, ("started",))  # before any program code: the sandbox works
    try:
        namespace = {"__name__": "__program__", "__builtins__": builtins}
        exec(compile(job["program"], "<program>", "exec", dont_inherit=True, optimize=0),
             namespace)
        function = namespace.get(job["entry_point"])
        if not callable(function):
            raise NameError("the program defines no function " + job["entry_point"])
    except BaseException as err:
        _send(replies, ("error",) + describe(err))
        os._exit(1)
    _send(replies, ("ready",))
    while True:
        frame = read_frame(calls, job["max_message"])
        if frame is None:
            os._exit(0)
        _, args, kwargs = decode(frame)
        try:
            reply = ("value", function(*args, **kwargs))
        except BaseException as err:
            reply = ("raised",) + describe(err)
        _send(replies, reply)


if __name__ == "__main__":
    try:
        _candidate_main()
    except BaseException:
        os._exit(1)
