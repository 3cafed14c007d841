"""A safe arithmetic calculator for the agent.

The expression is parsed with ``ast`` and evaluated by walking a whitelist of
node types; nothing is ever handed to ``eval``/``exec``. Sizes are bounded
(input length, node count, exponent, integer bits) so that a hostile or
careless expression cannot burn CPU or memory. Every refusal is a
``RetryException`` whose message tells the model how to rewrite the call.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext

from engine.errors import RetryException

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_EXPRESSION_NODES = 300
MAX_EXPONENT = 1000
MAX_INT_BITS = 4000
MAX_ROUND_DIGITS = 100
SIGNIFICANT_DIGITS = 12

_EXAMPLE = '{"expression": "sqrt(2) * (3 + 4) ^ 2"}'
_ALLOWED_SUMMARY = (
    "Allowed: numbers, + - * / // % ** (or ^), parentheses, the functions "
    "sqrt, abs, round, min, max, sum, log, ln, log10, exp, sin, cos, tan, floor, ceil "
    "and the constants pi, e."
)

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

# Functions that take a list of values, written either max(1, 2) or max([1, 2]).
_AGGREGATES = frozenset({"min", "max", "sum"})

_BINARY_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.UAdd,
    ast.USub,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.List,
    ast.Tuple,
    *_BINARY_OPERATORS,
)

# Friendlier names than the ast class names for the usual forbidden constructs.
_FORBIDDEN_DESCRIPTIONS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (a '.' followed by a name)",
    ast.Lambda: "lambda functions",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.Subscript: "indexing with []",
    ast.Compare: "comparisons (<, >, ==)",
    ast.BoolOp: "'and' / 'or'",
    ast.IfExp: "'if ... else' expressions",
    ast.Dict: "dictionaries",
    ast.Set: "sets",
    ast.Starred: "the '*' unpacking operator",
    ast.NamedExpr: "assignments (:=)",
    ast.JoinedStr: "text (strings)",
    ast.BitAnd: "bitwise operators (&, |, <<, >>)",
    ast.BitOr: "bitwise operators (&, |, <<, >>)",
    ast.BitXor: "bitwise operators (&, |, <<, >>)",
    ast.LShift: "bitwise operators (&, |, <<, >>)",
    ast.RShift: "bitwise operators (&, |, <<, >>)",
    ast.MatMult: "the '@' operator",
    ast.Invert: "the '~' operator",
    ast.Not: "'not'",
}


def _retry(problem: str) -> RetryException:
    """Build the error the model reads: what went wrong, what is allowed, an example."""
    return RetryException(f"calculate: {problem} {_ALLOWED_SUMMARY} Example: {_EXAMPLE}")


# --- preprocessing -----------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:[.,]\d+)*(?:[eE][+-]?\d+)?|\s+|.", re.DOTALL)
_SYMBOLS = {"×": "*", "÷": "/", "−": "-", "^": "**", "·": "*"}


def _normalise(expression: str) -> str:
    """Map human notations (^, ×, ÷, decimal commas) to Python syntax."""
    text = expression.strip().rstrip("=").strip()
    for symbol, replacement in _SYMBOLS.items():
        text = text.replace(symbol, replacement)
    return _convert_decimal_commas(text)


def _convert_decimal_commas(text: str) -> str:
    """Turn "3,5" into "3.5" where a comma cannot be an argument separator.

    A comma is a separator inside the parentheses of a function call or inside
    a list; anywhere else (top level, grouping parentheses) it can only be a
    French decimal comma.
    """
    stack: list[str] = []
    previous = ""
    pieces: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "(":
            stack.append("call" if _is_identifier(previous) else "group")
        elif token == "[":
            stack.append("list")
        elif token in ")]" and stack:
            stack.pop()
        elif "," in token and token[0].isdigit() and (not stack or stack[-1] == "group"):
            token = _decimal_comma_number(token)
        pieces.append(token)
        if not token.isspace():
            previous = token
    return "".join(pieces)


def _is_identifier(token: str) -> bool:
    return bool(token) and (token[0].isalpha() or token[0] == "_")


def _decimal_comma_number(token: str) -> str:
    if token.count(",") == 1 and "." not in token:
        return token.replace(",", ".")
    raise _retry(
        f"the number {token!r} is ambiguous: write decimals with a dot (3.5) or a single "
        "comma (3,5) and do not use thousands separators (1000000, not 1,000,000)."
    )


# --- validation ----------------------------------------------------------------


def _parse(expression: str) -> ast.Expression:
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise _retry(
            f"the expression is not valid arithmetic ({detail}). "
            "Use * for every multiplication and balance the parentheses."
        ) from None
    _validate(tree)
    return tree


def _validate(tree: ast.Expression) -> None:
    """Refuse every node outside the whitelist before computing anything."""
    node_count = 0
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            description = _FORBIDDEN_DESCRIPTIONS.get(type(node), type(node).__name__)
            raise _retry(f"not allowed here: {description}.")
        if isinstance(node, ast.expr):
            node_count += 1
    if node_count > MAX_EXPRESSION_NODES:
        raise _retry(
            f"the expression is too complex ({node_count} elements, at most "
            f"{MAX_EXPRESSION_NODES}); split it into several calls."
        )


# --- evaluation ------------------------------------------------------------------


def _checked(value: object) -> Number:
    """Keep every intermediate result real and of bounded size."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _retry("the result is not a real number (e.g. a fractional power of a negative).")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _retry(f"the result is too large (more than {MAX_INT_BITS} bits, about 10**1200).")
    if isinstance(value, float) and not math.isfinite(value):
        raise _retry("the result is too large for a floating-point number (about 1e308).")
    return value


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        return _name(node.id)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand)
        return _checked(-operand if isinstance(node.op, ast.USub) else +operand)
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.List | ast.Tuple):
        raise _retry(
            "a comma is only allowed between function arguments, e.g. max(3, 5); "
            "write decimals with a dot (3.5) or with a comma but no space (3,5)."
        )
    raise _retry(f"not allowed here: {type(node).__name__}.")


def _constant(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _retry(f"{value!r} is not a number; only numbers can be computed.")
    return _checked(value)


def _name(name: str) -> Number:
    if name in CONSTANTS:
        return CONSTANTS[name]
    if name in _FUNCTIONS:
        raise _retry(f"{name!r} is a function: call it with parentheses, e.g. {name}(2).")
    raise _retry(f"unknown name {name!r}: replace variables and words by their numeric value.")


def _binary(node: ast.BinOp) -> Number:
    left = _evaluate(node.left)
    right = _evaluate(node.right)
    try:
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        if isinstance(node.op, ast.Add):
            return _checked(left + right)
        if isinstance(node.op, ast.Sub):
            return _checked(left - right)
        if isinstance(node.op, ast.Mult):
            return _checked(left * right)
        if isinstance(node.op, ast.Div):
            return _checked(left / right)
        if isinstance(node.op, ast.FloorDiv):
            return _checked(left // right)
        if isinstance(node.op, ast.Mod):
            return _checked(left % right)
    except ZeroDivisionError:
        raise _retry("division by zero; check the divisor.") from None
    except OverflowError:
        raise _retry("a number is too large to compute (about 1e308 at most).") from None
    raise _retry(f"the operator {type(node.op).__name__} is not allowed.")


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise _retry(
            f"the exponent {exponent} is too large (at most {MAX_EXPONENT} in absolute value)."
        )
    # Estimate the size before computing: 31 ** 1000 must not be built to be refused.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS
    ):
        raise _retry(f"the result of {base} ** {exponent} is too large (about 10**1200 at most).")
    result: Number = base**exponent
    return result


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        if isinstance(node.func, ast.Constant | ast.BinOp | ast.UnaryOp):
            raise _retry("write multiplications explicitly: 2 * (3 + 4), not 2(3 + 4).")
        raise _retry("only the listed functions can be called, by their bare name.")
    name = node.func.id
    function = _FUNCTIONS.get(name)
    if function is None:
        raise _retry(f"unknown function {name!r}.")
    if node.keywords:
        raise _retry(f"{name}() takes positional arguments only, e.g. round(3.14159, 2).")
    args = _call_arguments(name, node.args)
    try:
        return _checked(function(args))
    except ZeroDivisionError:
        raise _retry(f"division by zero in {name}().") from None
    except OverflowError:
        raise _retry(f"the result of {name}() is too large.") from None
    except ValueError:
        raise _retry(
            f"{name}() is not defined for these values (e.g. sqrt or log of a negative number)."
        ) from None


def _call_arguments(name: str, nodes: Sequence[ast.expr]) -> list[Number]:
    """Evaluate arguments; min/max/sum also accept a single list: max([1, 2])."""
    if name in _AGGREGATES and len(nodes) == 1 and isinstance(nodes[0], ast.List | ast.Tuple):
        nodes = nodes[0].elts
    return [_evaluate(argument) for argument in nodes]


# --- functions -------------------------------------------------------------------


def _arity(name: str, args: list[Number], minimum: int, maximum: int) -> None:
    if not minimum <= len(args) <= maximum:
        expected = str(minimum) if minimum == maximum else f"{minimum} to {maximum}"
        raise _retry(
            f"{name}() takes {expected} argument(s), got {len(args)}. Arguments are separated "
            "by commas, so inside a function write decimals with a dot: sqrt(2.25)."
        )


def _unary(name: str, function: Callable[[float], Number]) -> Callable[[list[Number]], Number]:
    def apply(args: list[Number]) -> Number:
        _arity(name, args, 1, 1)
        return function(args[0])

    return apply


def _aggregate(
    name: str, function: Callable[[list[Number]], Number]
) -> Callable[[list[Number]], Number]:
    def apply(args: list[Number]) -> Number:
        if not args:
            raise _retry(f"{name}() needs at least one value, e.g. {name}(1, 2, 3).")
        return function(args)

    return apply


def _round(args: list[Number]) -> Number:
    """Round half up, as people expect (round(2.5) == 3), not Python's half-to-even."""
    _arity("round", args, 1, 2)
    digits = args[1] if len(args) == 2 else 0
    if not isinstance(digits, int) or abs(digits) > MAX_ROUND_DIGITS:
        raise _retry(
            "round() digits must be a whole number between "
            f"-{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}."
        )
    value = args[0]
    with localcontext() as context:
        context.prec = 2 * MAX_INT_BITS
        # repr() gives the shortest decimal form, so round(2.675, 2) is 2.68.
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        rounded = exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if isinstance(value, float) and len(args) == 2:
        return float(rounded)
    return int(rounded)


def _log(args: list[Number]) -> Number:
    _arity("log", args, 1, 2)
    return math.log(args[0]) if len(args) == 1 else math.log(args[0], args[1])


_FUNCTIONS: dict[str, Callable[[list[Number]], Number]] = {
    "sqrt": _unary("sqrt", math.sqrt),
    "abs": _unary("abs", abs),
    "round": _round,
    "min": _aggregate("min", min),
    "max": _aggregate("max", max),
    "sum": _aggregate("sum", sum),
    "log": _log,
    "ln": _unary("ln", math.log),
    "log10": _unary("log10", math.log10),
    "exp": _unary("exp", math.exp),
    "sin": _unary("sin", math.sin),
    "cos": _unary("cos", math.cos),
    "tan": _unary("tan", math.tan),
    "floor": _unary("floor", math.floor),
    "ceil": _unary("ceil", math.ceil),
}


# --- public API ------------------------------------------------------------------


def format_number(value: Number) -> str:
    """Ints stay exact; floats get 12 significant digits and no ".0" noise."""
    if isinstance(value, int):
        return str(value)
    text = f"{value:.{SIGNIFICANT_DIGITS}g}"
    return "0" if text == "-0" else text


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and safely; use it for every computation.

    Supports + - * / // % and ** (or ^), parentheses, decimals with a dot or a
    comma (3,5), and sqrt, abs, round, min, max, sum, log, ln, log10, exp, sin,
    cos, tan (radians), floor, ceil, pi, e. No variables, no units.
    Example: {"expression": "2 * (3 + 4)"}
    """
    if isinstance(expression, bool) or not isinstance(expression, str | int | float):
        raise _retry("`expression` must be a string.")
    text = str(expression)
    if len(text) > MAX_EXPRESSION_CHARS:
        raise _retry(
            f"the expression is too long ({len(text)} characters, at most "
            f"{MAX_EXPRESSION_CHARS}); split it into several calls."
        )
    if not text.strip():
        raise _retry("the expression is empty.")
    return format_number(_evaluate(_parse(_normalise(text))))
