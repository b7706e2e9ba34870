"""Tool handlers of the calculator plugin: ``calculate`` and ``unit_convert``.

Both handlers take the tool-call arguments as a dict and always return a JSON
string, on success as well as on every error; they never raise.

``calculate`` never hands the expression to ``eval``: it parses it with
:func:`ast.parse` and walks the tree itself, accepting only numbers, a few
operators, whitelisted functions and the constants pi, e and tau. Every
operation whose cost grows with the size of its operands is bounded before it
runs, so a hostile expression such as ``9**9**9**9`` fails fast.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable
from typing import Any

Number = int | float

# --------------------------------------------------------------------------- limits

#: Longest accepted expression, in characters.
MAX_EXPRESSION_LENGTH = 1000
#: Most AST nodes (as counted by ``ast.walk``) an expression may have.
MAX_AST_NODES = 500
#: Deepest nesting of expression nodes the evaluator will follow.
MAX_DEPTH = 200
#: Largest integer, in bits, that may appear during a computation.
MAX_INT_BITS = 100_000
#: Largest integer result returned, in decimal digits.
MAX_RESULT_DIGITS = 4000
#: Largest argument accepted by ``factorial``.
MAX_FACTORIAL = 5000
#: Largest ``abs(ndigits)`` accepted by ``round(x, ndigits)``.
MAX_ROUND_DIGITS = 400
#: Significant digits kept in float results of ``calculate``.
FLOAT_RESULT_DIGITS = 15

_RESULT_INT_BOUND = 10**MAX_RESULT_DIGITS


class CalcError(Exception):
    """An expression cannot be evaluated; the message is shown to the caller."""


def _dumps(payload: dict[str, Any]) -> str:
    """Serialise ``payload`` as strict JSON, falling back to an error object."""
    try:
        return json.dumps(payload, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        fallback: dict[str, Any] = {"error": f"result cannot be represented as JSON: {exc}"}
        expression = payload.get("expression")
        if isinstance(expression, str):
            fallback["expression"] = expression
        return json.dumps(fallback, ensure_ascii=False)


# --------------------------------------------------------------------------- calculate

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_BINARY_SYMBOLS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.MatMult: "@",
}
_ALLOWED_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)

_UNARY_SYMBOLS: dict[type[ast.unaryop], str] = {
    ast.UAdd: "+",
    ast.USub: "-",
    ast.Not: "not",
    ast.Invert: "~",
}

_CONSTRUCT_NAMES: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscript (indexing)",
    ast.Slice: "slice",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Lambda: "lambda",
    ast.Compare: "comparison",
    ast.BoolOp: "boolean operator (and/or)",
    ast.IfExp: "conditional expression (if/else)",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Set: "set",
    ast.Dict: "dict",
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.NamedExpr: "assignment expression (:=)",
    ast.Starred: "star argument (*args)",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}


def _describe(node: ast.AST) -> str:
    """Return a human-readable name for a syntax construct."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "None"
        return f"{type(node.value).__name__} literal"
    return _CONSTRUCT_NAMES.get(type(node), f"{type(node).__name__} expression")


def _check_number(value: Number) -> Number:
    """Reject non-finite floats and integers above :data:`MAX_INT_BITS`."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalcError("result too large (numeric overflow to infinity or NaN)")
    elif value.bit_length() > MAX_INT_BITS:
        raise CalcError(f"result too large (integers are limited to {MAX_INT_BITS} bits)")
    return value


def _as_int(value: Number, what: str) -> int:
    """Return ``value`` as an int if it is integral, otherwise raise a CalcError."""
    if isinstance(value, int):
        return value
    if value.is_integer():
        return int(value)
    raise CalcError(f"{what} must be an integer, got {value!r}")


def _power(base: Number, exponent: Number) -> Number:
    """Compute ``base ** exponent`` after checking that the result stays small."""
    if isinstance(base, int) and isinstance(exponent, int):
        if exponent < 0:
            if base == 0:
                raise ZeroDivisionError
            return _power(float(base), float(exponent))
        if base in (0, 1):
            return base if exponent else 1
        if base == -1:
            return 1 if exponent % 2 == 0 else -1
        if exponent > MAX_INT_BITS:
            raise CalcError(f"result too large (integers are limited to {MAX_INT_BITS} bits)")
        estimated_bits = exponent * math.log2(abs(base))
        if estimated_bits > MAX_INT_BITS:
            raise CalcError(
                f"result too large: about {estimated_bits:.0f} bits "
                f"(integers are limited to {MAX_INT_BITS} bits)"
            )
        result: int = base**exponent
        return result
    fbase, fexp = float(base), float(exponent)
    if fbase == 0.0 and fexp < 0:
        raise ZeroDivisionError
    if fbase < 0 and not fexp.is_integer():
        raise CalcError("complex result: negative base raised to a non-integer power")
    try:
        return math.pow(fbase, fexp)
    except OverflowError as exc:
        raise CalcError("result too large (floating-point overflow)") from exc


def _multiply(left: Number, right: Number) -> Number:
    """Multiply, refusing integer products above :data:`MAX_INT_BITS`."""
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1
    ):
        raise CalcError(f"result too large (integers are limited to {MAX_INT_BITS} bits)")
    return left * right


def _binary(op: ast.operator, left: Number, right: Number) -> Number:
    """Apply an allowed binary operator."""
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return _multiply(left, right)
    if isinstance(op, ast.Div):
        return left / right
    if isinstance(op, ast.FloorDiv):
        return left // right
    if isinstance(op, ast.Mod):
        return left % right
    return _power(left, right)


def _factorial(n: Number) -> int:
    """Bounded factorial of a non-negative integer."""
    if isinstance(n, float) and not n.is_integer():
        raise CalcError(f"factorial() is only defined for non-negative integers, got {n!r}")
    k = int(n)
    if k < 0:
        raise CalcError(f"factorial() is only defined for non-negative integers, got {k}")
    if k > MAX_FACTORIAL:
        raise CalcError(f"factorial() argument too large: {k} (limit {MAX_FACTORIAL})")
    return math.factorial(k)


def _round(x: Number, ndigits: Number | None = None) -> Number:
    """Python's ``round`` with a bounded ``ndigits``."""
    if ndigits is None:
        return round(x)
    digits = _as_int(ndigits, "round() ndigits")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise CalcError(f"round() ndigits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}")
    return round(x, digits)


def _log(x: Number, base: Number | None = None) -> float:
    """Natural logarithm, or logarithm to ``base``."""
    if base is None:
        return math.log(x)
    return math.log(x, base)


def _min(*values: Number) -> Number:
    """Smallest argument."""
    return min(values)


def _max(*values: Number) -> Number:
    """Largest argument."""
    return max(values)


# name -> (implementation, minimum arg count, maximum arg count or None for unbounded)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "log": (_log, 1, 2),
    "log2": (math.log2, 1, 1),
    "log10": (math.log10, 1, 1),
    "exp": (math.exp, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "min": (_min, 1, None),
    "max": (_max, 1, None),
    "pow": (_power, 2, 2),
    "factorial": (_factorial, 1, 1),
    "hypot": (math.hypot, 1, None),
    "degrees": (math.degrees, 1, 1),
    "radians": (math.radians, 1, 1),
}

#: Names of the functions ``calculate`` accepts.
ALLOWED_FUNCTIONS: tuple[str, ...] = tuple(sorted(_FUNCTIONS))
#: Names of the constants ``calculate`` accepts.
ALLOWED_CONSTANTS: tuple[str, ...] = tuple(_CONSTANTS)


def _short(value: Number) -> str:
    """Render a number for an error message, abbreviating huge integers."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"<{value.bit_length()}-bit integer>"
    return repr(value)


def _call(node: ast.Call, depth: int) -> Number:
    """Evaluate a call of a whitelisted function."""
    if not isinstance(node.func, ast.Name):
        raise CalcError(
            f"disallowed construct: {_describe(node.func)} as a function; call whitelisted "
            "functions by bare name, e.g. sqrt(x)"
        )
    name = node.func.id
    if name not in _FUNCTIONS:
        raise CalcError(
            f"function {name!r} is not allowed; allowed functions: {', '.join(ALLOWED_FUNCTIONS)}"
        )
    if node.keywords:
        raise CalcError(
            f"disallowed construct: keyword arguments in call of {name}(); use positional arguments only"
        )
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise CalcError(f"disallowed construct: star argument (*args) in call of {name}()")
    func, min_args, max_args = _FUNCTIONS[name]
    count = len(node.args)
    if count < min_args or (max_args is not None and count > max_args):
        if max_args is None:
            expected = f"at least {min_args}"
        elif min_args == max_args:
            expected = str(min_args)
        else:
            expected = f"{min_args} or {max_args}"
        raise CalcError(f"{name}() takes {expected} argument(s), got {count}")
    values = [_eval(arg, depth + 1) for arg in node.args]
    try:
        return func(*values)
    except ValueError as exc:
        shown = ", ".join(_short(v) for v in values)
        raise CalcError(f"math domain error: {name}() is not defined for ({shown})") from exc
    except OverflowError as exc:
        shown = ", ".join(_short(v) for v in values)
        raise CalcError(f"result too large: {name}({shown}) overflows") from exc


def _eval(node: ast.AST, depth: int = 0) -> Number:
    """Evaluate an allowed expression node, raising CalcError for anything else."""
    if depth > MAX_DEPTH:
        raise CalcError(f"expression too deeply nested (limit {MAX_DEPTH} levels)")
    if isinstance(node, ast.Expression):
        return _eval(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        value = node.value
        if type(value) is int:
            return _check_number(value)
        if type(value) is float:
            if not math.isfinite(value):
                raise CalcError(f"number literal too large: {value!r}")
            return value
        if isinstance(value, bool):
            raise CalcError("disallowed construct: boolean literal")
        if isinstance(value, complex):
            raise CalcError("disallowed construct: complex number literal")
        if isinstance(value, str | bytes):
            raise CalcError("disallowed construct: string literal")
        raise CalcError(f"disallowed construct: {_describe(node)}")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in _FUNCTIONS:
            raise CalcError(f"function {node.id!r} must be called, e.g. {node.id}(x)")
        raise CalcError(f"unknown name {node.id!r}; allowed constants: {', '.join(ALLOWED_CONSTANTS)}")
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.UAdd):
            return +_eval(node.operand, depth + 1)
        if isinstance(node.op, ast.USub):
            return -_eval(node.operand, depth + 1)
        symbol = _UNARY_SYMBOLS.get(type(node.op), type(node.op).__name__)
        raise CalcError(f"disallowed construct: operator {symbol!r}")
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, _ALLOWED_BINARY):
            symbol = _BINARY_SYMBOLS.get(type(node.op), type(node.op).__name__)
            raise CalcError(f"disallowed construct: operator {symbol!r}")
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        return _check_number(_binary(node.op, left, right))
    if isinstance(node, ast.Call):
        return _check_number(_call(node, depth))
    raise CalcError(f"disallowed construct: {_describe(node)}")


def _finish(value: Number) -> Number:
    """Turn a computed value into the JSON result value."""
    if isinstance(value, int):
        if abs(value) >= _RESULT_INT_BOUND:
            raise CalcError(f"result too large to display (more than {MAX_RESULT_DIGITS} digits)")
        return value
    if not math.isfinite(value):
        raise CalcError("result is not a finite number")
    rounded = float(f"{value:.{FLOAT_RESULT_DIGITS}g}")
    return rounded + 0.0  # turns -0.0 into 0.0


def evaluate(expression: str) -> Number:
    """Evaluate ``expression`` safely and return its value; raise CalcError on failure."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalcError(f"expression too long ({len(expression)} characters, limit {MAX_EXPRESSION_LENGTH})")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        if message == "invalid syntax":
            message = "unexpected token" if exc.offset else "incomplete expression"
        where = f" at column {exc.offset}" if exc.offset else ""
        raise CalcError(f"invalid syntax: {message}{where}") from exc
    except ValueError as exc:  # e.g. null bytes in the source
        raise CalcError(f"invalid syntax: {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        raise CalcError("expression too deeply nested") from exc
    node_count = sum(1 for _ in ast.walk(tree))
    if node_count > MAX_AST_NODES:
        raise CalcError(f"expression too complex ({node_count} syntax nodes, limit {MAX_AST_NODES})")
    try:
        value = _eval(tree)
    except ZeroDivisionError as exc:
        raise CalcError("division by zero") from exc
    except OverflowError as exc:
        raise CalcError(f"result too large: {exc}") from exc
    except RecursionError as exc:
        raise CalcError("expression too deeply nested") from exc
    return _finish(value)


def calculate(args: dict[str, Any], **kwargs: Any) -> str:
    """Tool handler: evaluate ``args["expression"]`` and return a JSON string."""
    try:
        if not isinstance(args, dict):
            return _dumps({"error": "arguments must be an object with an 'expression' string"})
        expression = args.get("expression")
        if expression is None:
            return _dumps({"error": "missing required argument 'expression'"})
        if not isinstance(expression, str):
            return _dumps({"error": f"'expression' must be a string, got {type(expression).__name__}"})
        if not expression.strip():
            return _dumps({"error": "'expression' is empty"})
        try:
            result = evaluate(expression)
        except CalcError as exc:
            return _dumps({"expression": expression, "error": str(exc)})
        return _dumps({"expression": expression, "result": result})
    except Exception as exc:  # the handler must never raise
        return _dumps({"error": f"internal error: {type(exc).__name__}: {exc}"})


# --------------------------------------------------------------------------- unit_convert

# canonical symbol -> (category, size of the unit in the category's base unit);
# temperature units are converted by formula instead of by factor.
_UNITS: dict[str, tuple[str, float]] = {
    # length, base metre
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "yd": ("length", 0.9144),
    # weight, base kilogram
    "kg": ("weight", 1.0),
    "g": ("weight", 0.001),
    "mg": ("weight", 0.000001),
    "lb": ("weight", 0.45359237),
    "oz": ("weight", 0.028349523125),
    # temperature
    "C": ("temperature", 1.0),
    "F": ("temperature", 1.0),
    "K": ("temperature", 1.0),
    # data, base byte, binary multiples
    "B": ("data", 1.0),
    "KB": ("data", 1024.0),
    "MB": ("data", 1024.0**2),
    "GB": ("data", 1024.0**3),
    "TB": ("data", 1024.0**4),
    "b": ("data", 1 / 8),
    "Kb": ("data", 1024 / 8),
    "Mb": ("data", 1024**2 / 8),
    "Gb": ("data", 1024**3 / 8),
    "Tb": ("data", 1024**4 / 8),
    # time, base second
    "ms": ("time", 0.001),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "hr": ("time", 3600.0),
    "day": ("time", 86400.0),
    "week": ("time", 604800.0),
}

# Exact (case-sensitive) alternative spellings -> canonical symbol.
_ALIASES: dict[str, str] = {
    **dict.fromkeys(("meter", "meters", "metre", "metres"), "m"),
    **dict.fromkeys(("kilometer", "kilometers", "kilometre", "kilometres"), "km"),
    **dict.fromkeys(("centimeter", "centimeters", "centimetre", "centimetres"), "cm"),
    **dict.fromkeys(("millimeter", "millimeters", "millimetre", "millimetres"), "mm"),
    **dict.fromkeys(("mile", "miles"), "mi"),
    **dict.fromkeys(("foot", "feet"), "ft"),
    **dict.fromkeys(("inch", "inches"), "in"),
    **dict.fromkeys(("yard", "yards"), "yd"),
    **dict.fromkeys(("kilogram", "kilograms", "kgs"), "kg"),
    **dict.fromkeys(("gram", "grams"), "g"),
    **dict.fromkeys(("milligram", "milligrams"), "mg"),
    **dict.fromkeys(("pound", "pounds", "lbs"), "lb"),
    **dict.fromkeys(("ounce", "ounces"), "oz"),
    **dict.fromkeys(("°C", "celsius", "Celsius"), "C"),
    **dict.fromkeys(("°F", "fahrenheit", "Fahrenheit"), "F"),
    **dict.fromkeys(("kelvin", "Kelvin"), "K"),
    **dict.fromkeys(("byte", "bytes"), "B"),
    **dict.fromkeys(("kilobyte", "kilobytes"), "KB"),
    **dict.fromkeys(("megabyte", "megabytes"), "MB"),
    **dict.fromkeys(("gigabyte", "gigabytes"), "GB"),
    **dict.fromkeys(("terabyte", "terabytes"), "TB"),
    **dict.fromkeys(("bit", "bits"), "b"),
    **dict.fromkeys(("kilobit", "kilobits"), "Kb"),
    **dict.fromkeys(("megabit", "megabits"), "Mb"),
    **dict.fromkeys(("gigabit", "gigabits"), "Gb"),
    **dict.fromkeys(("terabit", "terabits"), "Tb"),
    **dict.fromkeys(("millisecond", "milliseconds"), "ms"),
    **dict.fromkeys(("second", "seconds", "sec", "secs"), "s"),
    **dict.fromkeys(("minute", "minutes", "mins"), "min"),
    **dict.fromkeys(("h", "hour", "hours", "hrs"), "hr"),
    **dict.fromkeys(("d", "days"), "day"),
    **dict.fromkeys(("weeks",), "week"),
}

_CATEGORY_ORDER = ("length", "weight", "temperature", "data", "time")

#: Canonical unit symbols by category, in display order.
SUPPORTED_UNITS: dict[str, list[str]] = {
    category: [symbol for symbol, (cat, _) in _UNITS.items() if cat == category]
    for category in _CATEGORY_ORDER
}

_ABSOLUTE_ZERO_C = -273.15


def _resolve_unit(unit: str) -> str | None:
    """Map a unit spelling to its canonical symbol, or None if unknown."""
    unit = unit.strip()
    if unit in _UNITS:
        return unit
    return _ALIASES.get(unit)


def _supported_units_text() -> str:
    """Render the supported units as ``category: a, b; ...``."""
    return "; ".join(f"{category}: {', '.join(units)}" for category, units in SUPPORTED_UNITS.items())


def _parse_value(value: Any) -> float:
    """Return ``value`` as a finite float or raise ValueError with a readable message."""
    if value is None:
        raise ValueError("missing required argument 'value'")
    if isinstance(value, bool):
        raise ValueError("'value' must be a number, got a boolean")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError as exc:
            raise ValueError("'value' is too large") from exc
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError as exc:
            raise ValueError(f"'value' must be a number, got {value!r}") from exc
    else:
        raise ValueError(f"'value' must be a number, got {type(value).__name__}")
    if not math.isfinite(number):
        raise ValueError(f"'value' must be a finite number, got {value!r}")
    return number


def _round_significant(x: float) -> float:
    """Round to 6 significant digits while keeping the whole-number part intact."""
    if x == 0 or not math.isfinite(x):
        return x
    magnitude = math.floor(math.log10(abs(x)))
    return round(x, max(0, 5 - magnitude))


def _as_result(x: float) -> Number:
    """Return an int for integral values of moderate size, otherwise the float."""
    if x.is_integer() and abs(x) < 1e15:
        return int(x)
    return x + 0.0


def _to_celsius(value: float, unit: str) -> float:
    """Convert a temperature in ``unit`` to degrees Celsius."""
    if unit == "F":
        return (value - 32.0) * 5.0 / 9.0
    if unit == "K":
        return value + _ABSOLUTE_ZERO_C
    return value


def _from_celsius(celsius: float, unit: str) -> float:
    """Convert degrees Celsius to ``unit``."""
    if unit == "F":
        return celsius * 9.0 / 5.0 + 32.0
    if unit == "K":
        return celsius - _ABSOLUTE_ZERO_C
    return celsius


def convert(value: float, from_unit: str, to_unit: str) -> tuple[float, str]:
    """Convert between canonical unit symbols; return (raw result, category).

    Raises ValueError for mixed categories or temperatures below absolute zero.
    """
    from_category = _UNITS[from_unit][0]
    to_category = _UNITS[to_unit][0]
    if from_category != to_category:
        raise ValueError(f"cannot convert {from_category} ({from_unit}) to {to_category} ({to_unit})")
    if from_category == "temperature":
        celsius = _to_celsius(value, from_unit)
        if celsius < _ABSOLUTE_ZERO_C - 1e-9:
            raise ValueError(f"{_format_number(value)} {from_unit} is below absolute zero (0 K)")
        return _from_celsius(celsius, to_unit), from_category
    if from_unit == to_unit:
        return value, from_category
    return value * _UNITS[from_unit][1] / _UNITS[to_unit][1], from_category


def _format_number(x: Number) -> str:
    """Format a number for the ``input``/``output`` strings."""
    result = x if isinstance(x, int) else _as_result(x)
    return str(result) if isinstance(result, int) else repr(result)


def unit_convert(args: dict[str, Any], **kwargs: Any) -> str:
    """Tool handler: convert ``args["value"]`` from ``from_unit`` to ``to_unit``; return JSON."""
    try:
        if not isinstance(args, dict):
            return _dumps({"error": "arguments must be an object with 'value', 'from_unit' and 'to_unit'"})
        try:
            value = _parse_value(args.get("value"))
        except ValueError as exc:
            return _dumps({"error": str(exc)})
        resolved: dict[str, str] = {}
        for key in ("from_unit", "to_unit"):
            unit = args.get(key)
            if not isinstance(unit, str) or not unit.strip():
                return _dumps(
                    {"error": f"'{key}' must be a non-empty unit string", "supported_units": SUPPORTED_UNITS}
                )
            symbol = _resolve_unit(unit)
            if symbol is None:
                return _dumps(
                    {
                        "error": (
                            f"unknown unit {unit!r} for '{key}' (unit symbols are case-sensitive); "
                            f"supported units: {_supported_units_text()}"
                        ),
                        "supported_units": SUPPORTED_UNITS,
                    }
                )
            resolved[key] = symbol
        from_unit, to_unit = resolved["from_unit"], resolved["to_unit"]
        try:
            raw, category = convert(value, from_unit, to_unit)
        except ValueError as exc:
            return _dumps({"error": str(exc), "from_unit": from_unit, "to_unit": to_unit})
        if not math.isfinite(raw):
            return _dumps({"error": "result too large", "from_unit": from_unit, "to_unit": to_unit})
        result = _as_result(_round_significant(raw))
        return _dumps(
            {
                "input": f"{_format_number(value)} {from_unit}",
                "result": result,
                "output": f"{_format_number(result)} {to_unit}",
                "from_unit": from_unit,
                "to_unit": to_unit,
                "category": category,
            }
        )
    except Exception as exc:  # the handler must never raise
        return _dumps({"error": f"internal error: {type(exc).__name__}: {exc}"})
