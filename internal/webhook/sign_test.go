package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Standard Webhooks specification's published example: this secret,
// id, timestamp and payload sign to this v1 signature.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheSpecificationVector(t *testing.T) {
	sig, err := Sign([]string{vectorSecret}, vectorID, vectorTimestamp, []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, vectorSignature, sig)

	ok, err := Verify(vectorSecret, vectorID, vectorTimestamp, []byte(vectorPayload), sig)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Verify(vectorSecret, vectorID, vectorTimestamp+1, []byte(vectorPayload), sig)
	require.NoError(t, err)
	require.False(t, ok, "another timestamp does not verify")
}

func TestSignSeveralSecretsDuringRotation(t *testing.T) {
	next := NewSecret()
	sig, err := Sign([]string{next, vectorSecret}, vectorID, vectorTimestamp, []byte(vectorPayload))
	require.NoError(t, err)
	parts := strings.Split(sig, " ")
	require.Len(t, parts, 2)
	require.Equal(t, vectorSignature, parts[1])

	// The first signature is an independent HMAC with the new key.
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(next, "whsec_"))
	require.NoError(t, err)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(vectorID + ".1614265330." + vectorPayload))
	require.Equal(t, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)), parts[0])

	for _, s := range []string{next, vectorSecret} {
		ok, err := Verify(s, vectorID, vectorTimestamp, []byte(vectorPayload), sig)
		require.NoError(t, err)
		require.True(t, ok)
	}
}

func TestSecrets(t *testing.T) {
	s := NewSecret()
	require.True(t, strings.HasPrefix(s, "whsec_"))
	key, err := secretKey(s)
	require.NoError(t, err)
	require.Len(t, key, 24)
	require.NotEqual(t, s, NewSecret())

	_, err = Sign(nil, "id", 1, nil)
	require.ErrorContains(t, err, "no secret")
	_, err = Sign([]string{"nope"}, "id", 1, nil)
	require.ErrorContains(t, err, `secrets[0]: secret does not start with "whsec_"`)
	_, err = Sign([]string{"whsec_!!"}, "id", 1, nil)
	require.ErrorContains(t, err, "not base64")
}
