"""A numpy object array's pickle (as numpy.save writes one inside imdb.npz: a list of int lists per review)
read WITHOUT unpickling: the standard library's pickletools.genops walks the opcodes and only the few
globals numpy's own array pickle needs are accepted (a restricted reader; nothing is ever executed).
Anything else is refused."""

from __future__ import annotations

from array import array
from pickletools import genops

import numpy as np

MAX_MEMBER_BYTES = 1 << 30                 # an object array's pickle bigger than this is refused


class Refused(Exception):
    """Why an object array's pickle is not read (one line, no path)."""


# The only globals a numpy object array's pickle needs (numpy 1.x and 2.x module names; _codecs.encode
# is how protocol 2 spells a bytes literal). They are looked up as names and never called.
_GLOBALS = {("numpy.core.multiarray", "_reconstruct"): "reconstruct",
            ("numpy._core.multiarray", "_reconstruct"): "reconstruct",
            ("numpy", "ndarray"): "ndarray", ("numpy", "dtype"): "dtype", ("_codecs", "encode"): "encode"}


class _Global:
    def __init__(self, role: str, name: str):
        self.role, self.name = role, name


class _Seq:
    """A pickled list: integers only (kept as int64) or lists only; anything else is refused."""

    __slots__ = ("ints", "items")

    def __init__(self) -> None:
        self.ints = array("q")
        self.items: list[_Seq] = []

    def extend(self, values: list) -> None:
        if all(type(v) is int for v in values):
            if self.items and values:
                raise Refused("a list mixes integers and lists")
            try:
                self.ints.extend(values)
            except OverflowError:
                raise Refused("an integer does not fit in 64 bits") from None
        elif all(type(v) is _Seq for v in values):
            if len(self.ints):
                raise Refused("a list mixes integers and lists")
            self.items.extend(values)
        else:
            raise Refused("a list holds something other than integers or lists of integers")


class _DType:
    pass


class _Array:
    def __init__(self) -> None:
        self.data: _Seq | None = None
        self.length = -1


def _reduce(fn, args):
    if not isinstance(fn, _Global) or not isinstance(args, tuple):
        raise Refused("a call of something other than numpy's array reconstruction")
    if fn.role == "encode" and len(args) == 2 and args[1] == "latin1" and isinstance(args[0], str) \
            and len(args[0]) <= 16:
        return args[0].encode("latin-1")
    if fn.role == "dtype" and len(args) == 3 and args[0] in ("O8", "O4"):
        return _DType()
    if fn.role == "reconstruct" and len(args) == 3 and isinstance(args[0], _Global) \
            and args[0].role == "ndarray" and args[2] in (b"b", "b"):
        return _Array()
    raise Refused(f"{fn.name} called with arguments an object array of lists never needs")


def _build(obj, state) -> None:
    if isinstance(obj, _DType) and isinstance(state, tuple):
        return  # the dtype's byte order and flags: nothing to keep for an object dtype
    if not isinstance(obj, _Array) or obj.data is not None:
        raise Refused("state set on something other than one numpy array")
    if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[1], tuple) and len(state[1]) == 1
            and type(state[1][0]) is int and isinstance(state[2], _DType) and type(state[4]) is _Seq):
        raise Refused("the array is not a 1-D object array of lists")
    obj.data, obj.length = state[4], state[1][0]


INT_OPS = {"BININT", "BININT1", "BININT2"}   # a review's word ranks: millions of them, the hot case
INT64 = range(-(1 << 63), 1 << 63)


def read_object_array(payload: bytes) -> list[np.ndarray] | np.ndarray:
    """The pickle numpy writes for a 1-D object array, read without unpickling: a list of int64 arrays
    (an array of lists of ints) or one int64 array (an array of ints). Raises Refused otherwise.

    The standard library's ``pickletools.genops`` decodes the opcodes (it only parses, never builds or
    calls anything); this interprets only those such a pickle uses (protocols 2-5, as Python 2 and 3
    write them): no object is created but str, bytes, int, bool, None, tuples, lists of ints, lists of
    lists, and three placeholders for numpy's reconstruct/ndarray/dtype; no function is ever called."""
    stack: list = []
    marks: list[int] = []
    memo: dict[int, object] = {}

    def since_mark() -> list:
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        return items

    def global_(module: object, name: object) -> _Global:
        role = _GLOBALS.get((module, name))
        if role is None:
            raise Refused(f"it refers to {module}.{name}, and only numpy's object-array reconstruction is "
                           f"allowed (nothing was run)")
        return _Global(role, f"{module}.{name}")

    try:
        for opcode, arg, pos in genops(payload):
            op = opcode.name
            if op in INT_OPS or op in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                                       "BINSTRING", "SHORT_BINBYTES", "BINBYTES"):
                stack.append(arg)                           # ints, strings (Python 2 str as latin-1), bytes
            elif op in ("NEWTRUE", "NEWFALSE"):
                stack.append(op == "NEWTRUE")
            elif op == "PROTO":
                if arg > 5:
                    raise Refused("an unknown pickle protocol")
            elif op in ("FRAME", "STOP"):                   # a frame's bytes follow inline; genops ends at STOP
                pass
            elif op == "MARK":
                marks.append(len(stack))
            elif op == "GLOBAL":                            # "module name"
                stack.append(global_(*arg.split(" ", 1)))
            elif op == "STACK_GLOBAL":
                name, module = stack.pop(), stack.pop()
                stack.append(global_(module, name))
            elif op == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif op in ("BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif op in ("BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise Refused("a reference to nothing")
                stack.append(memo[arg])
            elif op == "EMPTY_TUPLE":
                stack.append(())
            elif op in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(op[-1])
                if len(stack) < n:
                    raise IndexError
                items = tuple(stack[-n:])
                del stack[-n:]
                stack.append(items)
            elif op == "TUPLE":
                stack.append(tuple(since_mark()))
            elif op == "EMPTY_LIST":
                stack.append(_Seq())
            elif op == "LIST":
                seq = _Seq()
                seq.extend(since_mark())
                stack.append(seq)
            elif op in ("APPEND", "APPENDS"):
                values = [stack.pop()] if op == "APPEND" else since_mark()
                if not stack or type(stack[-1]) is not _Seq:
                    raise Refused("an append to something other than a list")
                stack[-1].extend(values)
            elif op == "LONG1":
                if arg not in INT64:
                    raise Refused("an integer does not fit in 64 bits")
                stack.append(arg)
            elif op == "NONE":
                stack.append(None)
            elif op == "REDUCE":
                args = stack.pop()
                stack.append(_reduce(stack.pop(), args))
            elif op == "BUILD":
                state = stack.pop()
                _build(stack[-1], state)
            else:
                raise Refused(f"pickle opcode {opcode.code.encode('latin-1')!r} at byte {pos} is not one an "
                               f"object array of lists uses")
    except IndexError:
        raise Refused("the pickle is malformed (its stack ran out)") from None
    except ValueError:   # genops: bytes run out before an opcode's argument or STOP, an unknown opcode, bad UTF-8
        raise Refused("the pickle is truncated or malformed") from None
    result = stack[-1] if len(stack) == 1 else None
    if not isinstance(result, _Array) or result.data is None:
        raise Refused("the pickle does not hold one numpy array")
    seq = result.data
    if seq.items and not len(seq.ints) and len(seq.items) == result.length:
        return [np.frombuffer(item.ints, dtype=np.int64) for item in seq.items]
    if not seq.items and len(seq.ints) == result.length:
        return np.frombuffer(seq.ints, dtype=np.int64)
    raise Refused("the array's length does not match its contents")
