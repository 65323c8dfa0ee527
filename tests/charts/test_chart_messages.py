"""The chart refuses with the launcher's own message texts: the same str.format strings, whose
plain {field}s templates/_validate.tpl fills (scripts/chart_schema.messages)."""

from __future__ import annotations

import pytest

from launcher.cluster_spec import spec
from scripts import chart_schema


def test_the_chart_carries_the_launchers_texts_unchanged():
    messages = chart_schema.messages()
    assert messages["dirNotUnderMount"] == spec.DIR_NOT_UNDER_MOUNT
    assert "{dir}" in messages["dirNotUnderMount"]


@pytest.mark.parametrize("text", ["{code:>3} is reserved", "{0} is reserved", "set {{braces}}", "{code!r}"])
def test_a_message_the_chart_could_not_fill_is_refused(text):
    with pytest.raises(ValueError, match="only plain"):
        chart_schema.plain_fields("example", text)
