"""Secrets never written: lasting ones for the whole run, short-lived ones (tokens) while they are new."""

from worker.redaction import MASK, PASSING_KEPT, keep_secret, redact


def test_a_lasting_secret_is_hidden_raw_in_a_repr_and_in_json():
    keep_secret('pa"ss\\wörd-lasting')
    for written in ('pa"ss\\wörd-lasting', repr('pa"ss\\wörd-lasting'), '"pa\\"ss\\\\w\\u00f6rd-lasting"'):
        assert 'pa"ss' not in redact(f"x {written} y") and MASK in redact(f"x {written} y")


def test_only_the_newest_short_lived_secrets_are_kept_and_lasting_ones_stay():
    keep_secret("lasting-secret-one")
    tokens = [f"token-{i:03d}-abcdef" for i in range(PASSING_KEPT + 3)]
    for token in tokens:
        keep_secret(token, passing=True)
    newest = tokens[-PASSING_KEPT:]
    assert all(redact(token) == MASK for token in newest)
    assert all(redact(token) == token for token in tokens[:-PASSING_KEPT])  # long replaced: no longer checked
    assert redact("lasting-secret-one") == MASK
