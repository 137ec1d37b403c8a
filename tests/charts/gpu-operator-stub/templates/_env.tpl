{{- /*
The operator's env merge (controllers/object_controls.go setContainerEnv, v26.7.0): start from the
operand's DaemonSet template env, then apply each values entry by name: a variable the template already
sets gets the values' value in place, a new one is appended. So a values list that holds only gpupool's
hash keeps every template default, and a values entry for a template variable overrides it.
Call: include "stub.env" (dict "defaults" LIST "given" .Values.<operand>.env)
*/ -}}
{{- define "stub.env" -}}
{{- $given := .given | default list -}}
{{- $out := list -}}
{{- range $d := .defaults -}}
{{- $e := $d -}}
{{- range $g := $given -}}{{- if eq $g.name $d.name -}}{{- $e = dict "name" $d.name "value" $g.value -}}{{- end -}}{{- end -}}
{{- $out = append $out $e -}}
{{- end -}}
{{- $names := list -}}
{{- range $d := .defaults -}}{{- $names = append $names $d.name -}}{{- end -}}
{{- range $g := $given -}}{{- if not (has $g.name $names) -}}{{- $out = append $out $g -}}{{- end -}}{{- end -}}
{{- toYaml $out -}}
{{- end -}}
