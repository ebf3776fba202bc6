{{- define "web.labels" -}}
app: {{ .Release.Name }}
{{- end }}
