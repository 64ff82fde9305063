# A project secret arrives as an environment variable and is masked as *** in the log.
#   npx flow secret set GREETING_TOKEN 'open-sesame-42'
#   npx flow submit examples/secret.sh --follow
token=${GREETING_TOKEN:?set it first: flow secret set GREETING_TOKEN <value>}
echo "the token is: $token"
printf 'even split across writes: %s' "${token:0:5}"; printf '%s\n' "${token:5}"
echo "its length is ${#token} (derived values are not masked)"
