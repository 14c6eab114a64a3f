#!/usr/bin/env python3
"""Writes a policy file of N synthetic keyworded redaction rules, for redact_bench --policy.

The rules are shaped like a vendor-token file's (policies.d/12-vendor-tokens.toml): most find a
distinctive prefix followed by a token body (the keyword is the prefix); some find a value
after a vendor's name (the keyword is the name); a few have keywords that ordinary build output
holds often ("client", "session", ...), so that the bench also pays for rules that trigger.
The prefixes and names are random (seeded): none is a real vendor's.

    bench/synthetic_rules.py [N] > /tmp/synthetic.toml
    build/bench/redact_bench --mb 100 --policy /tmp/synthetic.toml
"""
import random
import sys

COMMON = ["client", "session", "access", "account", "service", "private", "bearer",
          "signing", "webhook", "refresh"]
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def word(rng, lo, hi):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(lo, hi)))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    rng = random.Random(32)
    used = set()
    out = ["# Synthetic keyworded rules for redact_bench (bench/synthetic_rules.py). Not a policy.\n"]
    for i in range(n):
        body = "".join(rng.choice(ALNUM) for _ in range(36))
        kind = i % 15
        if kind < 12:  # a distinctive prefix, as most vendor tokens have
            while True:
                prefix = word(rng, 3, 5) + rng.choice("_-")
                if prefix not in used:
                    break
            used.add(prefix)
            pattern = prefix + "[A-Za-z0-9]{32,40}"
            keywords = [prefix]
            example = "token " + prefix + body
        else:  # a value after a name
            name = COMMON[(i // 15) % len(COMMON)] if kind == 14 else word(rng, 6, 9)
            pattern = "(?i)" + name + r"""[a-z_.-]{0,20}\s*[:=]\s*["']?([A-Za-z0-9]{32,40})"""
            keywords = [name]
            example = name + "_key = \"" + body + "\""
        out.append("[[redact.rules]]\n")
        out.append('id = "synthetic_%03d"\n' % i)
        out.append("pattern = '''%s'''\n" % pattern)
        out.append("keywords = [%s]\n" % ", ".join('"%s"' % k for k in keywords))
        if "(" in pattern:
            out.append("group = 1\n")
        out.append("match = ['%s']\n\n" % example)
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
