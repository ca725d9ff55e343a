#!/bin/bash
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(command -v greet)" = /opt/greeter/bin/greet ] || fail "greet is not on the PATH: $PATH"
[ "$(greet world)" = "Bonjour, world!" ] || fail "greet world: $(greet world)"
[ "$(greet --shout world)" = "BONJOUR, WORLD!" ] || fail "greet --shout world: $(greet --shout world)"
# The greeting still comes from the environment.
[ "$(GREETING=Hola greet --shout amigo)" = "HOLA, AMIGO!" ] || fail "GREETING is not read"
echo 1 > /logs/verifier/reward.txt
