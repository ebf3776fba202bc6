{{/*
The shape of the validation helpers public charts use: a required value
checked with semverCompare, and fail with the chart's own message. Written
for this test.
*/}}
{{- define "web.validate" -}}
{{- $tag := required "image.tag is required" .Values.image.tag -}}
{{- if not (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+" $tag) -}}
{{- fail (printf "ERROR: version %q is not supported: image.tag must be a version" $tag) -}}
{{- end -}}
{{- if not (semverCompare ">=1.20.0-0" $tag) -}}
{{- fail (printf "ERROR: version %q is not supported: this chart needs 1.20 or later" $tag) -}}
{{- end -}}
{{- end -}}
