package confine

// Inferred is inferred, for the tests.
var Inferred = inferred

// ProbeChild is probeChild, for the tests.
var ProbeChild = probeChild
