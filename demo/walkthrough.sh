#!/usr/bin/env bash
# The flow of the spec with curl, against a running `npm run demo`.
# IDENTITY and BACKEND default to the demo's addresses, on PORT and BACKEND_PORT as for npm run demo.
set -euo pipefail
IDENTITY=${IDENTITY:-http://localhost:${PORT:-3000}}
BACKEND=${BACKEND:-http://localhost:${BACKEND_PORT:-3001}}
JAR=$(mktemp)
trap 'rm -f "$JAR"' EXIT

echo "# 1a. Actor token: alice signs in with the web client support-web (in a browser: open $BACKEND/web/login)"
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' "$BACKEND/web/login")
ACTOR_TOKEN=$(curl -sSL -c "$JAR" -b "$JAR" -d login=alice -d password=alice-password "$FORM/login" \
  | sed -n 's/.*<pre id="access-token">\([^<]*\)<.*/\1/p')
echo "ACTOR_TOKEN=$ACTOR_TOKEN"

echo '# 1b. M2M token, as the backend gets it for the Management API'
curl -sS -u impersonation-backend:impersonation-backend-secret \
  -d grant_type=client_credentials -d resource="$IDENTITY/api" -d scope=subject-tokens:create \
  "$IDENTITY/oidc/token"
echo

echo '# 2. Request impersonation of dave (a customer who needs no approval) from the backend'
RESPONSE=$(curl -sS -H "Authorization: Bearer $ACTOR_TOKEN" -H 'Content-Type: application/json' \
  -d '{"userId":"dave","reason":"Cannot see the invoices","ticketId":"T-1234"}' \
  "$BACKEND/api/request-impersonation")
echo "$RESPONSE"
SUBJECT_TOKEN=$(printf '%s' "$RESPONSE" | sed -n 's/.*"subjectToken":"\([^"]*\)".*/\1/p')

echo '# 3. Exchange the subject token, with the actor token, at the token endpoint'
RESPONSE=$(curl -sS -u support-web:support-web-secret \
  -d grant_type=urn:ietf:params:oauth:grant-type:token-exchange \
  -d scope=profile:read -d resource=https://api.example.com \
  -d subject_token="$SUBJECT_TOKEN" -d subject_token_type=urn:ietf:params:oauth:token-type:access_token \
  -d actor_token="$ACTOR_TOKEN" -d actor_token_type=urn:ietf:params:oauth:token-type:access_token \
  "$IDENTITY/oidc/token")
echo "$RESPONSE"
ACCESS_TOKEN=$(printf '%s' "$RESPONSE" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')

echo '# 4. Call the demo resource API with the impersonation token'
curl -sS -H "Authorization: Bearer $ACCESS_TOKEN" "$BACKEND/api/me"
echo
