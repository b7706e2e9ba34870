"""OpenAI function schemas for the calculator plugin's tools."""

from __future__ import annotations

from typing import Any

CALCULATE: dict[str, Any] = {
    "name": "calculate",
    "description": (
        "Evaluate a math expression exactly and safely (no code execution). "
        "Numbers: integers and decimals, e.g. 42, 3.5, 1e-3 (no strings, booleans or complex numbers). "
        "Operators: + - * / // (floor division) % (modulo) ** (power), unary + and -, parentheses. "
        "Functions (called by bare name with positional arguments only): "
        "sqrt(x), sin(x), cos(x), tan(x), asin(x), acos(x), atan(x) (angles in radians), "
        "log(x) (natural log) or log(x, base), log2(x), log10(x), exp(x), abs(x), "
        "round(x) or round(x, ndigits), floor(x), ceil(x), min(a, b, ...), max(a, b, ...), "
        "pow(x, y), factorial(n) (non-negative integer n <= 5000), hypot(a, b, ...), "
        "degrees(x), radians(x). "
        "Constants: pi, e, tau. "
        "Anything else (variables, attributes, indexing, comparisons, strings) is rejected. "
        "Integer arithmetic is exact; decimal results are rounded to 15 significant digits. "
        "Limits: 1000 characters, integer results up to 4000 digits, intermediate integers up to "
        '100000 bits. Returns JSON {"expression", "result"} or {"expression", "error"}. '
        'Example: "sqrt(2) * pi" or "2**16".'
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": 'The expression to evaluate, e.g. "pi * 5**2" or "log(1000, 10)".',
            },
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
}

UNIT_CONVERT: dict[str, Any] = {
    "name": "unit_convert",
    "description": (
        "Convert a value between units of the same category. Unit symbols are case-sensitive. "
        "Length: m, km, cm, mm, mi, ft, in, yd. "
        "Weight: kg, g, mg, lb, oz. "
        "Temperature: C, F, K (values below absolute zero are rejected). "
        "Data (binary, 1 KB = 1024 B): B, KB, MB, GB, TB for bytes and b, Kb, Mb, Gb, Tb for bits "
        "(1 B = 8 b, 1 Kb = 1024 b); note that 'MB' is megabytes and 'Mb' megabits, 'mB' is invalid. "
        "Time: ms, s, min, hr (alias h), day (alias d), week. "
        "Spelled-out names such as 'kilometers', 'miles', 'pounds', 'celsius', '°F', 'gigabytes', "
        "'hours' are accepted as aliases. Converting between categories (e.g. km to kg) is an error. "
        "Results are rounded to 6 significant digits (whole-number parts are kept in full). "
        'Returns JSON {"input", "result", "output", "from_unit", "to_unit", "category"} '
        'or {"error"}. Example: value=100, from_unit="F", to_unit="C" gives 37.7778.'
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "value": {
                "type": "number",
                "description": "The quantity to convert, e.g. 5 or 1.5.",
            },
            "from_unit": {
                "type": "string",
                "description": 'Unit of the given value, e.g. "km", "F", "TB".',
            },
            "to_unit": {
                "type": "string",
                "description": 'Unit to convert to; must be in the same category, e.g. "mi", "C", "GB".',
            },
        },
        "required": ["value", "from_unit", "to_unit"],
        "additionalProperties": False,
    },
}
