#!/bin/bash
# pgtether-healthcheck: the image's HEALTHCHECK (docker/Dockerfile). Exit 0 when pgtether's
# metrics port answers GET /healthz with 200 (its event loop serves), 1 otherwise. No curl in the
# image: bash's /dev/tcp. Needs metrics_listen_port in the ini (docker/pgtether.ini: 9127);
# PGTETHER_METRICS_PORT names another port. Docker's --timeout bounds a loop that does not answer.
port="${PGTETHER_METRICS_PORT:-9127}"
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
IFS= read -r status <&3 || exit 1
[[ $status == "HTTP/1."[01]" 200 "* ]]
