"""Immutable intermediate representation shared by every stage (knows nothing else of polyc)."""
from .affine import Affine
from .expr import (Access, Binary, Call, Cast, Const, Expr, IndexExpr, MATH_FUNCTIONS, ScalarRef,
                   Select, Unary, ARITHMETIC_OPS, COMPARISON_OPS, LOGICAL_OPS, rebuild,
                   stop_gradient)
from .program import (Constraint, Program, ScalarDecl, Statement, TensorDecl, UPDATE_OPS, ROLES,
                      lower_bound, upper_bound_exclusive)
from .types import DType, TensorType, f32, f64, i32, i64, u8, u16, DTYPES, as_dtype, dtype_of_numpy, promote, promote_numpy, tensor
