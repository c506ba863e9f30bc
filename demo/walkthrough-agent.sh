#!/usr/bin/env bash
# Cross-app access with curl, against a running `npm run demo`: the agent orders-agent signs dave in at
# the identity service, exchanges his ID token there for an ID-JAG to the orders application's
# authorization server, redeems it there for a token, and calls the orders API; then the identity
# service's session of that ID-JAG is stopped from dave's account page, and the orders API refuses the token.
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

echo '# 1. The agent signs dave in at the identity service (authorization code with PKCE) for his ID token'
VERIFIER=$(openssl rand -base64 48 | tr '+/' '-_' | tr -d '=\n')
CHALLENGE=$(printf '%s' "$VERIFIER" | openssl dgst -sha256 -binary | openssl base64 -A | tr '+/' '-_' | tr -d '=')
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' -G "$IDENTITY/oidc/auth" \
  -d client_id=orders-agent -d response_type=code -d scope=openid --data-urlencode redirect_uri="$REDIRECT_URI" \
  -d state=agent-sign-in -d code_challenge="$CHALLENGE" -d code_challenge_method=S256)
CALLBACK=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' \
  -d login=dave -d password="${DAVE_PASSWORD:-dave-password}" "$FORM/login")
CODE=$(printf '%s' "$CALLBACK" | sed -n 's/.*[?&]code=\([^&]*\).*/\1/p')
ID_TOKEN=$(curl -sS -u "$AGENT" -d grant_type=authorization_code -d code="$CODE" \
  --data-urlencode redirect_uri="$REDIRECT_URI" -d code_verifier="$VERIFIER" "$IDENTITY/oidc/token" | json id_token)
claims "$ID_TOKEN"; echo

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

echo "# 5. dave, on his account page, sees the agent acting for him and ends its access"
FORM=$(curl -sSL -c "$JAR" -b "$JAR" -o /dev/null -w '%{url_effective}' "$BACKEND/account/login")
PAGE=$(curl -sSL -c "$JAR" -b "$JAR" -d login=dave -d password="${DAVE_PASSWORD:-dave-password}" "$FORM/login")
printf '%s' "$PAGE" | grep -o 'An agent of client [^<]*'
SESSION=$(printf '%s' "$PAGE" | sed -n 's/.*id="agent-\(imp_[^"]*\)".*/\1/p' | tail -n 1)
CSRF=$(printf '%s' "$PAGE" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -n 1)
curl -sS -c "$JAR" -b "$JAR" -o /dev/null -w "POST /account/agents/$SESSION/end: HTTP %{http_code}\n" \
  -d csrf="$CSRF" "$BACKEND/account/agents/$SESSION/end"
STOPPED=$(date +%s%N)

echo "# 6. The session of the ID-JAG at the identity service (Management API): stopped"
ADMIN=$(curl -sS -u impersonation-backend:"${IMPERSONATION_BACKEND_SECRET:-impersonation-backend-secret}" \
  -d grant_type=client_credentials -d resource="$IDENTITY/api" -d scope=impersonations:read \
  "$IDENTITY/oidc/token" | json access_token)
curl -sS -H "Authorization: Bearer $ADMIN" "$IDENTITY/api/impersonations/$SESSION"; echo

echo '# 7. The orders API refuses the token: the stop reached the orders authorization server by SSF'
for _ in $(seq 1 40); do
  STATUS=$(curl -sS -o "$JAR.orders" -w '%{http_code}' -H "Authorization: Bearer $ORDERS_TOKEN" "$ORDERS/api/orders")
  [ "$STATUS" != 200 ] && break
  sleep 0.05
done
echo "HTTP $STATUS after $(( ($(date +%s%N) - STOPPED) / 1000000 )) ms: $(cat "$JAR.orders")"
