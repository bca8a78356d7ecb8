"""Arrays and tuples of arrays handed to compiled searches without their reference counts.

A compiled function that takes a tuple of arrays (a version's ``Pending``, a graph ``Side``, the engine's
``HotArrays``) counts a reference to every array in it on entry and releases them on return: an atomic
operation per array per call, which numba's reference-count pruning does not remove across the branches of
the small tests a search calls for every edge it follows. ``borrowed`` gives a search's entry point the same
arrays without an owner (a null meminfo, which the reference counts test and skip): the caller's references
keep them alive for the whole call, and nothing borrowed may leave the compiled code (be returned to Python
or stored).
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic

__all__ = ["borrowed"]


def _unowned_array(context, builder, array_type, value):
    """The array ``value`` with a null meminfo and no parent object."""
    source = context.make_array(array_type)(context, builder, value)
    view = context.make_array(array_type)(context, builder)
    for field in ("data", "nitems", "itemsize", "shape", "strides"):
        setattr(view, field, getattr(source, field))
    view.meminfo = context.get_constant_null(types.MemInfoPointer(array_type.dtype))
    view.parent = context.get_constant_null(types.pyobject)
    return view._getvalue()


@intrinsic
def borrowed(typingctx, value):
    """``value`` (an array, or a named tuple of arrays and scalars) of the same type, its arrays unowned."""
    if isinstance(value, types.Array):

        def array_codegen(context, builder, signature, args):
            return _unowned_array(context, builder, value, args[0])

        return value(value), array_codegen
    if isinstance(value, types.BaseNamedTuple):

        def tuple_codegen(context, builder, signature, args):
            result = args[0]
            for i, member in enumerate(value.types):
                if isinstance(member, types.Array):
                    item = _unowned_array(context, builder, member, builder.extract_value(args[0], i))
                    result = builder.insert_value(result, item, i)
            return result

        return value(value), tuple_codegen
    return None
