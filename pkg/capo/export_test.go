package capo

// DecodeUpstream is decodeUpstream (apitypes_mirror_test.go) for the external tests.
var DecodeUpstream = decodeUpstream
