package glance

// SelfOwner is this process's upload owner mark, for tests that fake another run's upload.
var SelfOwner = selfOwner
