package confine

// Inferred is inferred, for the tests.
var Inferred = inferred
