# shellcheck shell=bash
# Helpers the opt-in infra checks (images.sh, pod-container.sh) share for
# talking to a running Cordon. The sourcing script sets: `url` (Cordon's
# base URL), `work` (a folder holding `auth`, a curl header file with the
# agent key), `py` (a python3) and `fail` (prints and exits).

# METHOD PATH [JSON] -> the body on stdout; fails on a non-2xx status.
api() {
  local out code
  # shellcheck disable=SC2154 # work and url are the caller's
  out=$(curl -sS -H "@$work/auth" -H 'content-type: application/json' -X "$1" \
    ${3:+-d "$3"} -w '\n%{http_code}' "$url$2")
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  case $code in 2??) printf '%s' "$out" ;; *) fail "$1 $2: HTTP $code: ${out:0:400}" ;; esac
}

# KEY.PATH -> the JSON value at that dotted path of stdin.
jget() {
  # shellcheck disable=SC2154 # py is the caller's
  "$py" -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"
}
