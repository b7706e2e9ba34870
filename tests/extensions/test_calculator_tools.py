"""Unit tests for the bundled calculator plugin (extensions/calculator), without the kernel."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "extensions" / "calculator"
PACKAGE_NAME = "calc_plugin_under_test"


def _load_plugin() -> Any:
    """Import extensions/calculator as a package so that its relative imports work."""
    if PACKAGE_NAME in sys.modules:
        return sys.modules[PACKAGE_NAME]
    spec = importlib.util.spec_from_file_location(
        PACKAGE_NAME, PLUGIN_DIR / "__init__.py", submodule_search_locations=[str(PLUGIN_DIR)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE_NAME] = module
    spec.loader.exec_module(module)
    return module


plugin = _load_plugin()
tools = plugin.tools
schemas = plugin.schemas


def _strict_loads(text: str) -> dict[str, Any]:
    """Parse JSON, failing on the non-standard NaN/Infinity tokens."""

    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON constant {token!r} in {text!r}")

    assert isinstance(text, str)
    payload = json.loads(text, parse_constant=reject)
    assert isinstance(payload, dict)
    return payload


def calc(expression: Any) -> dict[str, Any]:
    """Call the calculate handler and parse its JSON answer."""
    return _strict_loads(tools.calculate({"expression": expression}))


def calc_error(expression: str) -> str:
    """Call calculate on an expression that must fail; return the error message."""
    payload = calc(expression)
    assert "result" not in payload, payload
    assert payload["expression"] == expression
    assert isinstance(payload["error"], str) and payload["error"]
    return payload["error"]


def convert(value: Any, from_unit: Any, to_unit: Any) -> dict[str, Any]:
    """Call the unit_convert handler and parse its JSON answer."""
    return _strict_loads(tools.unit_convert({"value": value, "from_unit": from_unit, "to_unit": to_unit}))


def convert_error(value: Any, from_unit: Any, to_unit: Any) -> str:
    """Call unit_convert with arguments that must fail; return the error message."""
    payload = convert(value, from_unit, to_unit)
    assert "result" not in payload and "output" not in payload, payload
    assert isinstance(payload["error"], str) and payload["error"]
    return payload["error"]


# --------------------------------------------------------------------------- calculate: results


def test_seed_examples() -> None:
    assert calc("2**16") == {"expression": "2**16", "result": 65536}
    assert calc("sqrt(144)") == {"expression": "sqrt(144)", "result": 12}
    assert calc("pi * 5**2")["result"] == pytest.approx(math.pi * 25, rel=1e-14)
    assert calc("sqrt(2)*pi")["result"] == pytest.approx(math.sqrt(2) * math.pi, rel=1e-14)


def test_integer_results_stay_exact_ints() -> None:
    payload = calc("2**100")
    assert payload["result"] == 1267650600228229401496703205376
    assert isinstance(payload["result"], int)
    assert calc("factorial(25)")["result"] == 15511210043330985984000000
    assert calc("123456789 * 987654321")["result"] == 121932631112635269


def test_float_results_are_rounded_to_15_significant_digits() -> None:
    assert calc("0.1 + 0.2")["result"] == 0.3
    assert calc("pi")["result"] == 3.14159265358979


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("-7 % 3", 2),
        ("7.5 % 2", 1.5),
        ("2 ** -1", 0.5),
        ("2 ** 0.5", math.sqrt(2)),
        ("(-2) ** 3", -8),
        ("-2 ** 2", -4),
        ("2 ** 3 ** 2", 512),
        ("+5", 5),
        ("--5", 5),
        ("1e3 + 1", 1001.0),
        ("  2 + 2  ", 4),
        ("1_000 * 3", 3000),
    ],
)
def test_operators(expression: str, expected: float) -> None:
    result = calc(expression)["result"]
    assert result == pytest.approx(expected, rel=1e-14)
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sqrt(2)", math.sqrt(2)),
        ("sin(pi / 2)", 1.0),
        ("cos(0)", 1.0),
        ("tan(pi / 4)", 1.0),
        ("asin(1)", math.pi / 2),
        ("acos(0.5)", math.pi / 3),
        ("atan(1)", math.pi / 4),
        ("log(e)", 1.0),
        ("log(8, 2)", 3.0),
        ("log(1000, 10)", 3.0),
        ("log2(1024)", 10.0),
        ("log10(0.001)", -3.0),
        ("exp(2)", math.exp(2)),
        ("abs(-5)", 5),
        ("abs(-2.5)", 2.5),
        ("round(2.567)", 3),
        ("round(2.5)", 2),
        ("round(2.567, 2)", 2.57),
        ("round(1234, -2)", 1200),
        ("floor(-2.5)", -3),
        ("ceil(2.1)", 3),
        ("min(3, 1.5, 2)", 1.5),
        ("max(3, 1, 2)", 3),
        ("max(7)", 7),
        ("pow(2, 10)", 1024),
        ("pow(4, 0.5)", 2.0),
        ("factorial(0)", 1),
        ("factorial(10)", 3628800),
        ("factorial(5.0)", 120),
        ("hypot(3, 4)", 5.0),
        ("hypot(2, 3, 6)", 7.0),
        ("degrees(pi)", 180.0),
        ("radians(180)", math.pi),
        ("e", math.e),
        ("tau", math.tau),
        ("sqrt(16) + log10(100) * floor(2.9)", 8.0),
    ],
)
def test_functions_and_constants(expression: str, expected: float) -> None:
    result = calc(expression)["result"]
    assert result == pytest.approx(expected, rel=1e-14, abs=1e-15)
    assert type(result) is type(expected)


def test_large_but_allowed_integer_is_exact() -> None:
    payload = calc("2**13000")
    assert payload["result"] == 2**13000
    assert calc("factorial(1000)")["result"] == math.factorial(1000)
    # Huge intermediate values are fine as long as the final result is small.
    assert calc("factorial(3000) // factorial(2998)")["result"] == 3000 * 2999
    assert calc("2**60000 / 2**59990")["result"] == 1024.0


def test_handler_accepts_extra_keyword_arguments() -> None:
    payload = _strict_loads(tools.calculate({"expression": "6 * 7"}, task_id="t1", session_id="s1"))
    assert payload == {"expression": "6 * 7", "result": 42}


# --------------------------------------------------------------------------- calculate: rejections


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("().__class__", "attribute access"),
        ("().__class__.__bases__[0].__subclasses__()", "attribute access"),
        ("__import__('os')", "'__import__'"),
        ("__import__('os').system('echo unsafe')", "attribute access"),
        ("math.sqrt(4)", "attribute access"),
        ("open('/etc/passwd')", "'open'"),
        ("eval('1')", "'eval'"),
        ("x", "unknown name 'x'"),
        ("x + 1", "unknown name 'x'"),
        ("__builtins__", "unknown name '__builtins__'"),
        ("inf", "unknown name 'inf'"),
        ("nan", "unknown name 'nan'"),
        ("'abc'", "string literal"),
        ("'a' * 3", "string literal"),
        ("b'abc'", "string literal"),
        ("f'{1}'", "f-string"),
        ("lambda: 1", "lambda"),
        ("(lambda: 1)()", "lambda"),
        ("[i for i in (1, 2)]", "list comprehension"),
        ("{i for i in (1, 2)}", "set comprehension"),
        ("{i: i for i in (1, 2)}", "dict comprehension"),
        ("sum(i for i in (1, 2))", "'sum'"),
        ("max(i for i in (1, 2))", "generator expression"),
        ("round(2.567, ndigits=1)", "keyword arguments"),
        ("sqrt(x=4)", "keyword arguments"),
        ("sqrt(*(4,))", "star argument"),
        ("max(**{})", "keyword arguments"),
        ("[1, 2][0]", "subscript"),
        ("[1, 2]", "list"),
        ("(1, 2)", "tuple"),
        ("1, 2", "tuple"),
        ("{1, 2}", "set"),
        ("{1: 2}", "dict"),
        ("1 < 2", "comparison"),
        ("1 == 1", "comparison"),
        ("1 and 2", "boolean operator"),
        ("1 if 1 else 2", "conditional expression"),
        ("(y := 3)", "assignment expression"),
        ("True", "boolean literal"),
        ("False + 1", "boolean literal"),
        ("None", "None"),
        ("...", "ellipsis"),
        ("2j", "complex number literal"),
        ("not 1", "'not'"),
        ("~1", "'~'"),
        ("1 << 3", "'<<'"),
        ("8 >> 1", "'>>'"),
        ("6 & 3", "'&'"),
        ("6 | 3", "'|'"),
        ("6 ^ 3", "'^'"),
        ("sqrt", "must be called"),
    ],
)
def test_disallowed_constructs_are_named(expression: str, fragment: str) -> None:
    assert fragment in calc_error(expression)


def test_unknown_function_error_lists_allowed_functions() -> None:
    error = calc_error("sum(1, 2)")
    assert "'sum' is not allowed" in error
    for name in ("sqrt", "log", "factorial", "hypot", "radians"):
        assert name in error


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("sqrt(1, 2)", "sqrt() takes 1 argument(s), got 2"),
        ("log(1, 2, 3)", "log() takes 1 or 2 argument(s), got 3"),
        ("round()", "round() takes 1 or 2 argument(s), got 0"),
        ("min()", "min() takes at least 1 argument(s), got 0"),
        ("pow(2)", "pow() takes 2 argument(s), got 1"),
        ("hypot()", "hypot() takes at least 1 argument(s), got 0"),
    ],
)
def test_wrong_argument_count(expression: str, fragment: str) -> None:
    assert calc_error(expression) == fragment


@pytest.mark.parametrize(
    "expression", ["sqrt(-1)", "log(0)", "log(-1, 10)", "acos(2)", "asin(-1.5)", "log10(-5)"]
)
def test_math_domain_errors(expression: str) -> None:
    assert calc_error(expression).startswith("math domain error")


# --------------------------------------------------------------------------- calculate: resource limits


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9**9",
        "10**10**10",
        "2**100000",
        "(-3)**100000",
        "2**99999 * 2**99999",
        "pow(10, 10**10)",
        "2**(10**1000)",
        "factorial(100000)",
        "factorial(5001)",
        "factorial(5000)",
        "2**99999",
        "10.0**400",
        "2**1e6",
        "1e308 * 10",
        "1e308 + 1e308",
        "-1e308 * 10",
        "exp(1000)",
        "sin(10**400)",
        "10**400 / 0.5",
        "1e999",
    ],
)
def test_huge_results_are_refused(expression: str) -> None:
    assert "too large" in calc_error(expression)


def test_power_limit_message_names_the_limit() -> None:
    error = calc_error("10**10**10")
    assert error.startswith("result too large")
    assert str(tools.MAX_INT_BITS) in error


def test_factorial_limits() -> None:
    assert calc_error("factorial(100000)") == "factorial() argument too large: 100000 (limit 5000)"
    assert "non-negative integers" in calc_error("factorial(-1)")
    assert "non-negative integers" in calc_error("factorial(2.5)")


def test_trivial_bases_with_huge_exponents_are_cheap_and_exact() -> None:
    assert calc("1**(10**1000)")["result"] == 1
    assert calc("0**(10**1000)")["result"] == 0
    assert calc("(-1)**(10**1000 + 1)")["result"] == -1
    assert calc("(-1)**(10**1000)")["result"] == 1


def test_round_ndigits_is_bounded() -> None:
    assert "between" in calc_error("round(5, -10**9)")
    assert "must be an integer" in calc_error("round(1.5, 1.5)")


def test_negative_base_with_fractional_exponent() -> None:
    assert "complex result" in calc_error("(-8) ** (1/3)")
    assert "complex result" in calc_error("pow(-8, 0.5)")


def test_expression_length_limit() -> None:
    expression = "1+" * 600 + "1"
    assert calc_error(expression) == f"expression too long ({len(expression)} characters, limit 1000)"
    assert calc("1" * 5 + "+" + "1" * 5)["result"] == 22222


def test_node_count_limit() -> None:
    assert calc("+".join(["1"] * 150))["result"] == 150
    assert "expression too complex" in calc_error("+".join(["1"] * 200))
    assert "expression too complex" in calc_error("-" * 400 + "1")


def test_deep_parenthesis_nesting_is_an_error() -> None:
    assert calc("(" * 150 + "1" + ")" * 150)["result"] == 1
    assert calc_error("(" * 300 + "1" + ")" * 300).startswith("invalid syntax")


# --------------------------------------------------------------------------- calculate: errors


@pytest.mark.parametrize(
    "expression", ["1/0", "1 // 0", "5 % 0", "1.0 / 0.0", "5 % 0.0", "0 ** -1", "0.0 ** -2", "pow(0, -1)"]
)
def test_division_by_zero(expression: str) -> None:
    assert calc(expression) == {"expression": expression, "error": "division by zero"}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 +", "invalid syntax: incomplete expression"),
        ("2 3", "invalid syntax: unexpected token at column 3"),
        ("(1", "invalid syntax: '(' was never closed at column 1"),
        (")", "invalid syntax: unmatched ')' at column 1"),
    ],
)
def test_syntax_errors(expression: str, message: str) -> None:
    assert calc(expression) == {"expression": expression, "error": message}


@pytest.mark.parametrize("expression", ["import os", "x = 1", "1; 2", "def f(): pass", "1\x002"])
def test_statements_and_garbage_are_syntax_errors(expression: str) -> None:
    assert calc_error(expression).startswith("invalid syntax: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required argument 'expression'"),
        ({"expression": None}, "missing required argument 'expression'"),
        ({"expression": ""}, "'expression' is empty"),
        ({"expression": "   "}, "'expression' is empty"),
        ({"expression": 42}, "'expression' must be a string, got int"),
        ({"expression": ["1+1"]}, "'expression' must be a string, got list"),
        (None, "arguments must be an object with an 'expression' string"),
        ("1+1", "arguments must be an object with an 'expression' string"),
    ],
)
def test_missing_or_invalid_expression(args: Any, message: str) -> None:
    assert _strict_loads(tools.calculate(args)) == {"error": message}


def test_calculate_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(expression: str) -> float:
        raise RuntimeError("boom")

    monkeypatch.setattr(tools, "evaluate", explode)
    assert _strict_loads(tools.calculate({"expression": "1+1"})) == {
        "error": "internal error: RuntimeError: boom"
    }


@pytest.mark.parametrize(
    "expression",
    ["2**16", "1/0", "1 +", "().__class__", "1e308*10", "9**9**9**9", "factorial(5000)", "'x'", "pi", "°"],
)
def test_every_calculate_answer_is_strict_json(expression: str) -> None:
    payload = calc(expression)
    assert payload["expression"] == expression
    assert ("result" in payload) != ("error" in payload)


# --------------------------------------------------------------------------- unit_convert


def test_unit_convert_seed_examples() -> None:
    assert convert(100, "F", "C") == {
        "input": "100 F",
        "result": 37.7778,
        "output": "37.7778 C",
        "from_unit": "F",
        "to_unit": "C",
        "category": "temperature",
    }
    km_to_mi = convert(5, "km", "mi")
    assert km_to_mi["result"] == 3.10686
    assert km_to_mi["output"] == "3.10686 mi"
    assert km_to_mi["category"] == "length"
    tb_to_gb = convert(1.5, "TB", "GB")
    assert tb_to_gb["result"] == 1536
    assert tb_to_gb["input"] == "1.5 TB"
    assert tb_to_gb["output"] == "1536 GB"
    assert tb_to_gb["category"] == "data"


@pytest.mark.parametrize(
    ("value", "from_unit", "to_unit", "expected"),
    [
        (1, "mi", "km", 1.60934),
        (1, "mi", "m", 1609.34),
        (1, "mi", "mm", 1609344),
        (1, "ft", "in", 12),
        (1, "yd", "ft", 3),
        (250, "cm", "m", 2.5),
        (1, "m", "mm", 1000),
        (1, "in", "cm", 2.54),
        (1, "km", "ft", 3280.84),
        (1, "kg", "lb", 2.20462),
        (1, "lb", "oz", 16),
        (1, "lb", "g", 453.592),
        (1000, "mg", "g", 1),
        (1, "mg", "kg", 0.000001),
        (0, "C", "F", 32),
        (212, "F", "C", 100),
        (-40, "C", "F", -40),
        (0, "K", "C", -273.15),
        (300, "K", "F", 80.33),
        (0, "C", "K", 273.15),
        (1, "KB", "B", 1024),
        (1, "GB", "MB", 1024),
        (1, "TB", "B", 1099511627776),
        (2048, "KB", "MB", 2),
        (1, "B", "b", 8),
        (1, "KB", "Kb", 8),
        (1, "Kb", "KB", 0.125),
        (1, "Mb", "MB", 0.125),
        (1, "Gb", "Mb", 1024),
        (1, "Tb", "GB", 128),
        (1, "week", "day", 7),
        (1, "day", "hr", 24),
        (90, "min", "hr", 1.5),
        (1500, "ms", "s", 1.5),
        (2, "h", "min", 120),
        (1, "d", "s", 86400),
        (5, "s", "s", 5),
    ],
)
def test_conversions(value: float, from_unit: str, to_unit: str, expected: float) -> None:
    payload = convert(value, from_unit, to_unit)
    assert payload["result"] == pytest.approx(expected, rel=1e-12)


def test_integral_results_are_ints_and_rounding_keeps_whole_part() -> None:
    assert convert(1, "TB", "B")["output"] == "1099511627776 B"
    assert isinstance(convert(1, "week", "hr")["result"], int)
    assert convert(1, "in", "mi")["result"] == 1.57828e-05
    assert convert(123456.789, "m", "m")["result"] == 123457
    assert convert(1, "mg", "kg")["output"] == "1e-06 kg"


@pytest.mark.parametrize(
    ("from_unit", "to_unit", "canonical_from", "canonical_to"),
    [
        ("kilometers", "miles", "km", "mi"),
        ("kilometer", "mile", "km", "mi"),
        ("°C", "°F", "C", "F"),
        ("celsius", "kelvin", "C", "K"),
        ("pounds", "kilograms", "lb", "kg"),
        ("gigabytes", "megabytes", "GB", "MB"),
        ("bits", "bytes", "b", "B"),
        ("hours", "minutes", "hr", "min"),
        (" km ", " m ", "km", "m"),
    ],
)
def test_aliases_resolve_to_canonical_symbols(
    from_unit: str, to_unit: str, canonical_from: str, canonical_to: str
) -> None:
    payload = convert(2, from_unit, to_unit)
    expected = convert(2, canonical_from, canonical_to)
    assert payload == expected
    assert payload["from_unit"] == canonical_from
    assert payload["to_unit"] == canonical_to
    assert payload["input"] == f"2 {canonical_from}"


@pytest.mark.parametrize(
    "unit", ["mB", "mb", "kb", "kB", "Kg", "KG", "KM", "Km", "c", "f", "k", "M", "S", "Min", "HR"]
)
def test_unit_symbols_are_case_sensitive(unit: str) -> None:
    error = convert_error(1, unit, "B")
    assert f"unknown unit {unit!r}" in error
    assert "case-sensitive" in error


def test_megabytes_megabits_and_invalid_mB_are_distinct() -> None:
    assert convert(1, "MB", "KB")["result"] == 1024
    assert convert(1, "Mb", "KB")["result"] == 128
    payload = convert(1, "mB", "KB")
    assert "result" not in payload
    assert "'mB'" in payload["error"]
    assert convert(1, "KB", "Kb")["result"] == 8
    assert convert(8, "Kb", "KB")["result"] == 1


EXPECTED_SUPPORTED_UNITS = {
    "length": ["m", "km", "cm", "mm", "mi", "ft", "in", "yd"],
    "weight": ["kg", "g", "mg", "lb", "oz"],
    "temperature": ["C", "F", "K"],
    "data": ["B", "KB", "MB", "GB", "TB", "b", "Kb", "Mb", "Gb", "Tb"],
    "time": ["ms", "s", "min", "hr", "day", "week"],
}


def test_unknown_unit_lists_supported_units() -> None:
    payload = convert(3, "parsec", "km")
    assert payload["supported_units"] == EXPECTED_SUPPORTED_UNITS
    error = payload["error"]
    assert error.startswith("unknown unit 'parsec' for 'from_unit'")
    for category, units in EXPECTED_SUPPORTED_UNITS.items():
        assert f"{category}: {', '.join(units)}" in error
    assert convert(3, "km", "furlong")["error"].startswith("unknown unit 'furlong' for 'to_unit'")


@pytest.mark.parametrize(
    ("from_unit", "to_unit", "message"),
    [
        ("km", "kg", "cannot convert length (km) to weight (kg)"),
        ("kilograms", "miles", "cannot convert weight (kg) to length (mi)"),
        ("C", "s", "cannot convert temperature (C) to time (s)"),
        ("GB", "m", "cannot convert data (GB) to length (m)"),
        ("hr", "F", "cannot convert time (hr) to temperature (F)"),
    ],
)
def test_category_mismatch(from_unit: str, to_unit: str, message: str) -> None:
    assert convert_error(1, from_unit, to_unit) == message


@pytest.mark.parametrize(("value", "unit"), [(-1, "K"), (-300, "C"), (-500, "F"), (-273.2, "C")])
def test_below_absolute_zero(value: float, unit: str) -> None:
    assert "below absolute zero" in convert_error(value, unit, "C")


def test_absolute_zero_itself_is_fine() -> None:
    assert convert(-273.15, "C", "K")["result"] == 0
    assert convert(-459.67, "F", "K")["result"] == 0
    assert convert(0, "K", "F")["result"] == -459.67


@pytest.mark.parametrize(
    ("value", "expected"),
    [("100", 37.7778), (" 100 ", 37.7778), ("1e2", 37.7778), (100.0, 37.7778), ("212", 100)],
)
def test_numeric_strings_are_accepted(value: Any, expected: float) -> None:
    assert convert(value, "F", "C")["result"] == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("abc", "'value' must be a number, got 'abc'"),
        ("100 km", "'value' must be a number, got '100 km'"),
        ("", "'value' must be a number, got ''"),
        (True, "'value' must be a number, got a boolean"),
        (False, "'value' must be a number, got a boolean"),
        (None, "missing required argument 'value'"),
        ([1], "'value' must be a number, got list"),
        ({"v": 1}, "'value' must be a number, got dict"),
        ("nan", "'value' must be a finite number"),
        ("inf", "'value' must be a finite number"),
        ("1e999", "'value' must be a finite number"),
        (float("nan"), "'value' must be a finite number"),
        (float("-inf"), "'value' must be a finite number"),
        (10**400, "'value' is too large"),
    ],
)
def test_bad_values(value: Any, fragment: str) -> None:
    assert fragment in convert_error(value, "m", "km")


@pytest.mark.parametrize("unit", [None, "", "   ", 5, ["m"]])
def test_bad_unit_arguments(unit: Any) -> None:
    payload = convert(1, unit, "m")
    assert payload["error"] == "'from_unit' must be a non-empty unit string"
    assert payload["supported_units"] == EXPECTED_SUPPORTED_UNITS
    assert convert(1, "m", unit)["error"] == "'to_unit' must be a non-empty unit string"


def test_missing_arguments_and_non_dict_args() -> None:
    assert _strict_loads(tools.unit_convert({})) == {"error": "missing required argument 'value'"}
    assert _strict_loads(tools.unit_convert({"value": 1, "from_unit": "m"}))["error"] == (
        "'to_unit' must be a non-empty unit string"
    )
    expected = {"error": "arguments must be an object with 'value', 'from_unit' and 'to_unit'"}
    assert _strict_loads(tools.unit_convert(None)) == expected
    assert _strict_loads(tools.unit_convert([1, "m", "km"])) == expected


def test_overflowing_conversion_is_an_error() -> None:
    assert convert_error(1e308, "TB", "B") == "result too large"


def test_unit_convert_accepts_extra_keyword_arguments() -> None:
    text = tools.unit_convert({"value": 1, "from_unit": "km", "to_unit": "m"}, task_id="t", extra=1)
    assert _strict_loads(text)["result"] == 1000


def test_unit_convert_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(value: float, from_unit: str, to_unit: str) -> tuple[float, str]:
        raise RuntimeError("boom")

    monkeypatch.setattr(tools, "convert", explode)
    text = tools.unit_convert({"value": 1, "from_unit": "km", "to_unit": "m"})
    assert _strict_loads(text) == {"error": "internal error: RuntimeError: boom"}


# --------------------------------------------------------------------------- schemas


def test_schemas_have_the_bare_openai_shape() -> None:
    from kernel.tools import normalize_schema

    assert set(schemas.CALCULATE) == {"name", "description", "parameters"}
    assert set(schemas.UNIT_CONVERT) == {"name", "description", "parameters"}
    assert schemas.CALCULATE["name"] == "calculate"
    assert schemas.UNIT_CONVERT["name"] == "unit_convert"
    assert schemas.CALCULATE["parameters"]["required"] == ["expression"]
    assert schemas.CALCULATE["parameters"]["properties"]["expression"]["type"] == "string"
    assert schemas.UNIT_CONVERT["parameters"]["required"] == ["value", "from_unit", "to_unit"]
    props = schemas.UNIT_CONVERT["parameters"]["properties"]
    assert (props["value"]["type"], props["from_unit"]["type"], props["to_unit"]["type"]) == (
        "number",
        "string",
        "string",
    )
    # The kernel's own registration check accepts both, unchanged and with no warnings.
    for schema in (schemas.CALCULATE, schemas.UNIT_CONVERT):
        assert normalize_schema(schema["name"], schema) == (schema, [])


def test_calculate_description_lists_everything_supported() -> None:
    description = schemas.CALCULATE["description"]
    for name in tools.ALLOWED_FUNCTIONS:
        assert f"{name}(" in description, name
    for name in tools.ALLOWED_CONSTANTS:
        assert name in description
    for operator in ("+", "-", "*", "/", "//", "%", "**"):
        assert f" {operator} " in description or f" {operator} (" in description, operator


def test_unit_convert_description_lists_every_unit() -> None:
    description = schemas.UNIT_CONVERT["description"]
    for category, units in tools.SUPPORTED_UNITS.items():
        assert category.capitalize() in description
        for unit in units:
            assert any(f" {unit}{end}" in description for end in (",", " ", ".")), unit
    assert tools.SUPPORTED_UNITS == EXPECTED_SUPPORTED_UNITS


# --------------------------------------------------------------------------- registration and hook


@pytest.fixture
def empty_call_log() -> None:
    plugin._call_log.clear()


def test_hook_records_every_tool_call(empty_call_log: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=PACKAGE_NAME)
    hook = plugin._on_post_tool_call
    assert hook("web_search", {"q": "x"}, "{}", task_id="t1", session_id="s1", duration_ms=12.5) is None
    hook("calculate", args={"expression": "1"}, result="{}", task_id="t2", session_id="s2", duration_ms=3)
    hook("terminal", unexpected_future_kwarg=True)
    assert plugin.recent_calls() == [
        {"tool": "web_search", "task_id": "t1", "session_id": "s1", "duration_ms": 12.5},
        {"tool": "calculate", "task_id": "t2", "session_id": "s2", "duration_ms": 3},
        {"tool": "terminal", "task_id": None, "session_id": None, "duration_ms": None},
    ]
    debug_lines = [
        r.getMessage() for r in caplog.records if r.name == PACKAGE_NAME and r.levelno == logging.DEBUG
    ]
    assert len(debug_lines) == 3
    assert "tool=web_search" in debug_lines[0] and "duration_ms=12.5" in debug_lines[0]


def test_recent_calls_returns_a_copy(empty_call_log: None) -> None:
    plugin._on_post_tool_call("calculate", task_id="t1")
    snapshot = plugin.recent_calls()
    snapshot[0]["tool"] = "tampered"
    snapshot.append({"tool": "extra"})
    assert plugin.recent_calls() == [
        {"tool": "calculate", "task_id": "t1", "session_id": None, "duration_ms": None}
    ]


def test_call_log_is_bounded(empty_call_log: None) -> None:
    for index in range(150):
        plugin._on_post_tool_call(f"tool{index}")
    calls = plugin.recent_calls()
    assert len(calls) == 100
    assert calls[0]["tool"] == "tool50"
    assert calls[-1]["tool"] == "tool149"


# --------------------------------------------------------------------------- shipped files


def test_plugin_manifest() -> None:
    import yaml

    manifest = yaml.safe_load((PLUGIN_DIR / "plugin.yaml").read_text(encoding="utf-8"))
    assert manifest["name"] == "calculator"
    assert manifest["version"] == "1.0.0"
    assert manifest["author"] == "hermes-kernel"
    assert isinstance(manifest["description"], str) and len(manifest["description"]) > 20
    assert manifest["provides_tools"] == ["calculate", "unit_convert"]
    assert manifest["provides_hooks"] == ["post_tool_call"]


def test_skill_file_has_front_matter_and_covers_both_tools() -> None:
    import yaml

    text = (PLUGIN_DIR / "skills" / "calculator" / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front_matter, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(front_matter)
    assert meta["name"] == "calculator"
    assert isinstance(meta["description"], str) and meta["description"]
    assert "`calculate`" in body and "`unit_convert`" in body
