"""Two-lane vectors of float64 for numba kernels: the split search scans a node's two children in one pass.

numba has no vector type, and LLVM left the scalar scan scalar (it cannot prove the histogram and the running
state apart), so these are LLVM ``<2 x double>`` values under a numba type of their own, with the few operations
the scan needs as intrinsics: lane-wise arithmetic, comparisons giving a lane mask, and a select that stays a
select (marked unpredictable, so LLVM does not turn it back into a branch: which lane improves is data-dependent).
"""

import operator

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, models, overload, register_model

_DOUBLES = ir.VectorType(ir.DoubleType(), 2)
_BITS = ir.VectorType(ir.IntType(1), 2)


class Lanes(types.Type):
    """Two float64 values, one per lane."""

    def __init__(self):
        super().__init__(name="Lanes2xf64")


class LaneMask(types.Type):
    """A truth value per lane."""

    def __init__(self):
        super().__init__(name="LaneMask2")


lanes_type = Lanes()
mask_type = LaneMask()


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _DOUBLES)


@register_model(LaneMask)
class _MaskModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _BITS)


def _index(i):
    return ir.Constant(ir.IntType(32), i)


@intrinsic
def lanes(typingctx, first, second):
    """The vector (first, second) of two floats."""
    def codegen(context, builder, signature, args):
        vector = ir.Constant(_DOUBLES, ir.Undefined)
        for i, (value, value_type) in enumerate(zip(args, signature.args)):
            vector = builder.insert_element(vector, context.cast(builder, value, value_type, types.float64),
                                            _index(i))
        return vector
    if isinstance(first, types.Number) and isinstance(second, types.Number):
        return lanes_type(first, second), codegen
    return None


@intrinsic
def lane(typingctx, vector, i):
    """Lane ``i`` (a literal 0 or 1) of a vector, as a float, or of a mask, as a bool."""
    if not (isinstance(vector, (Lanes, LaneMask)) and isinstance(i, types.IntegerLiteral)):
        return None
    position = i.literal_value

    def codegen(context, builder, signature, args):
        return builder.extract_element(args[0], _index(position))
    return (types.float64 if isinstance(vector, Lanes) else types.boolean)(vector, i), codegen


@intrinsic
def select(typingctx, mask, if_true, if_false):
    """Lane-wise ``if_true if mask else if_false``, as a select LLVM keeps branch-free."""
    if not (isinstance(mask, LaneMask) and isinstance(if_true, Lanes) and isinstance(if_false, Lanes)):
        return None

    def codegen(context, builder, signature, args):
        chosen = builder.select(*args)
        chosen.set_metadata("unpredictable", builder.module.add_metadata([]))
        return chosen
    return lanes_type(mask, if_true, if_false), codegen


@intrinsic
def any_lane(typingctx, mask):
    """Whether any lane of ``mask`` is true."""
    if not isinstance(mask, LaneMask):
        return None

    def codegen(context, builder, signature, args):
        return builder.or_(builder.extract_element(args[0], _index(0)), builder.extract_element(args[0], _index(1)))
    return types.boolean(mask), codegen


def _binary(name, build):
    @intrinsic
    def operation(typingctx, a, b):
        if isinstance(a, Lanes) and isinstance(b, Lanes):
            return lanes_type(a, b), lambda context, builder, signature, args: build(builder, *args)
        if isinstance(a, LaneMask) and isinstance(b, LaneMask) and name in ("and", "or"):
            return mask_type(a, b), lambda context, builder, signature, args: build(builder, *args)
        return None
    operation.__name__ = f"_{name}"
    return operation


def _comparison(predicate):
    @intrinsic
    def operation(typingctx, a, b):
        if isinstance(a, Lanes) and isinstance(b, Lanes):
            return mask_type(a, b), lambda context, builder, signature, args: builder.fcmp_ordered(predicate, *args)
        return None
    return operation


_add = _binary("add", lambda builder, a, b: builder.fadd(a, b))
_sub = _binary("sub", lambda builder, a, b: builder.fsub(a, b))
_mul = _binary("mul", lambda builder, a, b: builder.fmul(a, b))
_and = _binary("and", lambda builder, a, b: builder.and_(a, b))
_or = _binary("or", lambda builder, a, b: builder.or_(a, b))
_OPERATORS = {operator.add: _add, operator.sub: _sub, operator.mul: _mul, operator.and_: _and,
              operator.or_: _or, operator.gt: _comparison(">"), operator.ge: _comparison(">="),
              operator.lt: _comparison("<"), operator.ne: _comparison("!=")}


def _register(op, implementation):
    @overload(op)
    def _overload(a, b):
        if isinstance(a, (Lanes, LaneMask)) and isinstance(b, (Lanes, LaneMask)):
            return lambda a, b: implementation(a, b)
        return None


for _op, _implementation in _OPERATORS.items():
    _register(_op, _implementation)
