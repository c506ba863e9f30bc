#!/usr/bin/env bash
# Cross-app access with curl, against a running `npm run demo`: the agent orders-agent signs dave in at
# the identity service (with offline_access), exchanges his ID token there for an ID-JAG to the orders
# application's authorization server, redeems it there for a token, and calls the orders API; then does
# the same from its refresh token. Dave ends the first ID-JAG's session from his account page, then all of
# the agent's access, and the orders API refuses both tokens.
# IDENTITY, BACKEND and ORDERS default to the demo's addresses, on PORT, BACKEND_PORT and ORDERS_PORT.
set -euo pipefail
IDENTITY=${IDENTITY:-http://localhost:${PORT:-3000}}
BACKEND=${BACKEND:-http://localhost:${BACKEND_PORT:-3001}}
ORDERS=${ORDERS:-http://localhost:${ORDERS_PORT:-$(( ${PORT:-3000} + 2 ))}}
ORDERS_ISSUER=https://auth.orders.example.com
AGENT=orders-agent:${ORDERS_AGENT_SECRET:-orders-agent-secret}
REDIRECT_URI=$BACKEND/agent/callback
JAR=$(mktemp)
trap 'rm -f "$JAR" "$JAR.orders"' EXIT
json() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
# A JWT's payload as JSON: base64url, padded for base64 -d.
claims() { local part; part=$(printf '%s' "$1" | cut -d. -f2 | tr '_-' '/+'); while [ $(( ${#part} % 4 )) -ne 0 ]; do part="$part="; done; printf '%s' "$part" | base64 -d; }

echo '# 1. The agent signs dave in at the identity service (authorization code with PKCE) for his ID token and a refresh token'
VERIFIER=$(openssl rand -base64 48 | tr '+/' '-_' | tr -d '=\n')
CHALLENGE=$(printf '%s' "$VERIFIER" | openssl dgst -sha256 -binary | openssl base64 -A | tr '+/' '-_' | tr -d '=')
# offline_access, with prompt=consent as OpenID Connect Core 11 asks: the code is then also redeemed for a refresh token.
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' -G "$IDENTITY/oidc/auth" \
  -d client_id=orders-agent -d response_type=code --data-urlencode 'scope=openid offline_access' -d prompt=consent \
  --data-urlencode redirect_uri="$REDIRECT_URI" -d state=agent-sign-in -d code_challenge="$CHALLENGE" \
  -d code_challenge_method=S256)
CALLBACK=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' \
  -d login=dave -d password="${DAVE_PASSWORD:-dave-password}" "$FORM/login")
CODE=$(printf '%s' "$CALLBACK" | sed -n 's/.*[?&]code=\([^&]*\).*/\1/p')
TOKENS=$(curl -sS -u "$AGENT" -d grant_type=authorization_code -d code="$CODE" \
  --data-urlencode redirect_uri="$REDIRECT_URI" -d code_verifier="$VERIFIER" "$IDENTITY/oidc/token")
ID_TOKEN=$(printf '%s' "$TOKENS" | json id_token)
REFRESH_TOKEN=$(printf '%s' "$TOKENS" | json refresh_token)
claims "$ID_TOKEN"; echo
echo "and a refresh token of ${#REFRESH_TOKEN} characters"

echo "# 2. The ID token for an ID-JAG to $ORDERS_ISSUER, at the identity service"
RESPONSE=$(curl -sS -u "$AGENT" "$IDENTITY/oidc/token" \
  -d grant_type=urn:ietf:params:oauth:grant-type:token-exchange \
  -d requested_token_type=urn:ietf:params:oauth:token-type:id-jag \
  -d subject_token="$ID_TOKEN" -d subject_token_type=urn:ietf:params:oauth:token-type:id_token \
  -d audience="$ORDERS_ISSUER" -d resource=https://api.orders.example.com -d scope=orders:read)
echo "$RESPONSE"
ID_JAG=$(printf '%s' "$RESPONSE" | json access_token)
claims "$ID_JAG"; echo

echo "# 3. The ID-JAG for a token of the orders API, at the orders application's authorization server ($ORDERS)"
RESPONSE=$(curl -sS -u "$AGENT" "$ORDERS/token" \
  -d grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer -d assertion="$ID_JAG")
echo "$RESPONSE"
ORDERS_TOKEN=$(printf '%s' "$RESPONSE" | json access_token)

echo '# 4. The orders API, with that token'
curl -sS -H "Authorization: Bearer $ORDERS_TOKEN" "$ORDERS/api/orders"; echo

echo "# 5. Once the ID token is old: the refresh token for a second ID-JAG (scope orders:read, the orders application's), redeemed, and the orders API"
RESPONSE=$(curl -sS -u "$AGENT" "$IDENTITY/oidc/token" \
  -d grant_type=urn:ietf:params:oauth:grant-type:token-exchange \
  -d requested_token_type=urn:ietf:params:oauth:token-type:id-jag \
  -d subject_token="$REFRESH_TOKEN" -d subject_token_type=urn:ietf:params:oauth:token-type:refresh_token \
  -d audience="$ORDERS_ISSUER" -d resource=https://api.orders.example.com -d scope=orders:read)
echo "$RESPONSE"
SECOND_JAG=$(printf '%s' "$RESPONSE" | json access_token)
claims "$SECOND_JAG"; echo
RESPONSE=$(curl -sS -u "$AGENT" "$ORDERS/token" \
  -d grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer -d assertion="$SECOND_JAG")
echo "$RESPONSE"
SECOND_TOKEN=$(printf '%s' "$RESPONSE" | json access_token)
curl -sS -H "Authorization: Bearer $SECOND_TOKEN" "$ORDERS/api/orders"; echo

echo "# 6. dave, on his account page, sees the agent acting for him (once per ID-JAG), ends the first one, then all of the agent's access"
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' "$BACKEND/account/login")
PAGE=$(curl -sSL -c "$JAR" -b "$JAR" -d login=dave -d password="${DAVE_PASSWORD:-dave-password}" "$FORM/login")
printf '%s' "$PAGE" | grep -o 'An agent of client [^<]*'
# The first ID-JAG's session: the page names it as the ID-JAG's impersonation_session does.
SESSION=$(claims "$ID_JAG" | json impersonation_session)
printf '%s' "$PAGE" | grep -q "id=\"agent-$SESSION\""
CSRF=$(printf '%s' "$PAGE" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -n 1)
curl -sS -c "$JAR" -b "$JAR" -o /dev/null -w "POST /account/agents/$SESSION/end: HTTP %{http_code}\n" \
  -d csrf="$CSRF" "$BACKEND/account/agents/$SESSION/end"
STOPPED=$(date +%s%N)
echo "Each ID-JAG is a session of its own: the second one's token still reads, HTTP $(curl -sS -o /dev/null \
  -w '%{http_code}' -H "Authorization: Bearer $SECOND_TOKEN" "$ORDERS/api/orders")"
curl -sS -c "$JAR" -b "$JAR" -o /dev/null -w "POST /account/agent-clients/orders-agent/end: HTTP %{http_code}\n" \
  -d csrf="$CSRF" "$BACKEND/account/agent-clients/orders-agent/end"
STOPPED_ALL=$(date +%s%N)

echo "# 7. The first ID-JAG's session at the identity service (Management API): stopped"
ADMIN=$(curl -sS -u impersonation-backend:"${IMPERSONATION_BACKEND_SECRET:-impersonation-backend-secret}" \
  -d grant_type=client_credentials -d resource="$IDENTITY/api" -d scope=impersonations:read \
  "$IDENTITY/oidc/token" | json access_token)
curl -sS -H "Authorization: Bearer $ADMIN" "$IDENTITY/api/impersonations/$SESSION"; echo

echo '# 8. The orders API refuses both tokens: the stops reached the orders authorization server by SSF'
for STOP in "$ORDERS_TOKEN $STOPPED" "$SECOND_TOKEN $STOPPED_ALL"; do
  read -r TOKEN SINCE <<< "$STOP"
  for _ in $(seq 1 40); do
    STATUS=$(curl -sS -o "$JAR.orders" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$ORDERS/api/orders")
    [ "$STATUS" != 200 ] && break
    sleep 0.05
  done
  echo "HTTP $STATUS after $(( ($(date +%s%N) - SINCE) / 1000000 )) ms: $(cat "$JAR.orders")"
done
