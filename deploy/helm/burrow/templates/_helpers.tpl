{{- define "burrow.labels" -}}
app.kubernetes.io/name: burrow
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "burrow.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
