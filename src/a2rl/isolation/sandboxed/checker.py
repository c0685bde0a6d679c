"""The trusted process of a code check: the dataset's context and test, with the entry point
bound to a proxy that sends each call's arguments as plain data and reads back plain data or an
exception.

Standard library only: the sandbox runs ``plaindata.py``, ``common.py`` and this text as one
program (``python -c``, so ``__name__`` is ``__main__``); the imports below are for tests and
linters, which import it as a module.
"""
import builtins
import os
import time

if __name__ != "__main__":
    from a2rl.isolation.plaindata import NotPlainData, decode, encode, read_frame, write_frame
    from a2rl.isolation.sandboxed.common import describe, read_job


class InvalidReply(BaseException):
    # Not an Exception: a test's `except Exception` must not swallow a broken candidate.
    pass


class CallTimeout(InvalidReply):
    pass


class CandidateError(Exception):
    pass


# exceptions that steer control flow where they are caught (a map() or a for loop ending
# early): a candidate raising one gets a CandidateError of that name instead
_CONTROL_FLOW = (StopIteration, StopAsyncIteration)


def remote_exception(name, message):
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        err = CandidateError(message)
    elif not issubclass(cls, Exception):  # SystemExit, KeyboardInterrupt, ...
        err = InvalidReply(message)
    elif issubclass(cls, _CONTROL_FLOW):
        err = CandidateError(message)
    else:
        try:
            err = cls(message)
        except Exception:
            err = CandidateError(message)
    err.remote_type = name
    return err


class Remote:
    def __init__(self, job):
        self.calls, self.replies = job["calls"], job["replies"]
        self.timeout, self.limit = job["call_timeout_s"], job["max_message"]
        self.broken = None
        for fd in (self.calls, self.replies):
            os.set_blocking(fd, False)

    def _fail(self, err):
        if self.broken is None:
            self.broken = err
        raise self.broken

    def _receive(self, deadline):
        try:
            frame = read_frame(self.replies, self.limit, deadline)
        except TimeoutError:
            self._fail(CallTimeout("the candidate did not answer within %gs" % self.timeout))
        except NotPlainData as err:
            self._fail(InvalidReply("the candidate's reply: " + str(err)))
        if frame is None:
            self._fail(InvalidReply("the candidate's process ended"))
        try:
            message = decode(frame)
        except NotPlainData as err:
            self._fail(InvalidReply("the candidate's reply: " + str(err)))
        if type(message) is not tuple or not message or type(message[0]) is not str:
            self._fail(InvalidReply("the candidate's reply is malformed"))
        return message

    def _raise_remote(self, message):
        if len(message) != 3 or type(message[1]) is not str or type(message[2]) is not str:
            self._fail(InvalidReply("the candidate's reply is malformed"))
        err = remote_exception(message[1], message[2])
        if isinstance(err, InvalidReply):
            self._fail(err)
        raise err

    def start(self):
        deadline = time.monotonic() + self.timeout
        if self._receive(deadline) != ("started",):
            self._fail(InvalidReply("the candidate's reply is malformed"))
        message = self._receive(deadline)
        if message[0] == "error":
            self._raise_remote(message)
        if message != ("ready",):
            self._fail(InvalidReply("the candidate's reply is malformed"))

    def call(self, args, kwargs):
        if self.broken is not None:
            raise self.broken
        try:
            text = encode(("call", args, kwargs))
        except NotPlainData as err:  # an honest limit: the test passes something else
            self._fail(InvalidReply("the test passes the candidate an argument that is "
                                    + str(err)))
        deadline = time.monotonic() + self.timeout
        try:
            write_frame(self.calls, text, deadline)
        except TimeoutError:
            self._fail(CallTimeout("the candidate did not read its call within %gs"
                                   % self.timeout))
        except OSError:
            self._fail(InvalidReply("the candidate's process ended"))
        message = self._receive(deadline)
        if message[0] == "value" and len(message) == 2:
            return message[1]
        if message[0] == "raised":
            self._raise_remote(message)
        if message[0] == "unsendable" and len(message) == 2 and type(message[1]) is str:
            self._fail(InvalidReply("the candidate returned " + message[1]))
        self._fail(InvalidReply("the candidate's reply is malformed"))

    def proxy(self, name):
        def candidate(*args, **kwargs):
            return self.call(args, kwargs)
        candidate.__name__ = candidate.__qualname__ = name
        return candidate


def one_line(text):
    """``text`` with each line boundary written as its escape ("\\n", "\\u2028"): every one
    that ``str.splitlines`` breaks at, since that is what a reader of the verdict may split
    with, so no exception message can put a line of its own (a "passed") in the verdict."""
    out = []
    for piece in text.splitlines(keepends=True):
        body = piece.splitlines()[0]
        out.append(body + repr(piece[len(body):])[1:-1])
    return "".join(out)


def _checker_main():
    job = read_job()
    verdict = job["verdict"]

    def report(line):
        os.write(verdict, (one_line(line)[:700] + "\n").encode("utf-8", "replace"))

    report("started")
    remote = Remote(job)
    try:
        context = compile(job["context"], "<context>", "exec", dont_inherit=True, optimize=0)
        test = compile(job["test"], "<test>", "exec", dont_inherit=True, optimize=0)
        remote.start()
        namespace = {"__name__": "__test__"}
        exec(context, namespace)
        candidate = remote.proxy(job["entry_point"])
        namespace[job["entry_point"]] = candidate
        exec(test, namespace)
        if job["call_check"]:
            namespace["check"](candidate)
        if remote.broken is not None:  # caught by a bare `except:` in the test
            raise remote.broken
    except BaseException as err:
        name, text = describe(err)
        report(("timeout " if isinstance(err, CallTimeout) else "failed ") + name + ": " + text)
        os._exit(1)
    report("passed")
    os._exit(0)


if __name__ == "__main__":
    try:
        _checker_main()
    except BaseException:
        os._exit(1)
