package desiredstate

// VersionLabel is how messages name a version: its id, followed by its
// display name in parentheses when it has one ("v-3f2a… (1.28)").
func VersionLabel(version, displayName string) string {
	if displayName == "" || version == "" {
		return version
	}
	return version + " (" + displayName + ")"
}
