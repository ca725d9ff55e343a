#!/bin/bash
set -e
cat > /opt/greeter/bin/greet <<'SH'
#!/bin/sh
# Greet someone in the environment's language ($GREETING); --shout: in capitals.
shout=
if [ "$1" = --shout ]; then shout=1; shift; fi
line="${GREETING:?GREETING is not set}, $1!"
if [ -n "$shout" ]; then echo "$line" | tr '[:lower:]' '[:upper:]'; else echo "$line"; fi
SH
chmod +x /opt/greeter/bin/greet
