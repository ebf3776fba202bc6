package compiler

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/ecsspec"
)

func init() {
	registerBackend(serviceBackend{
		name: "awsEcs", accepted: config.BackendAwsEcs, compiled: ecsspec.Kind,
		set: func(b *config.ServiceBackend) bool { return b.AwsEcs != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = ecsspec.Kind
			c.checkECSEnv(m)
			if obj := c.awsEcs(field+".awsEcs", m.Backend.AwsEcs, rt, data); obj != nil {
				out.Objects = []any{obj}
			}
		},
		inject: func(_ *Result, rc *CompiledReleaseChannel, meta map[string]string) error {
			for _, obj := range rc.Objects {
				if o, ok := obj.(*ecsspec.Object); ok {
					if err := injectECS(o, rc.Env, meta); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}

// awsEcs renders a service's ECS task definition and service definition for
// the channel (templates over the service's data: parameters, constants,
// builtins), checks each against the AWS SDK's input shapes, and returns
// the object the ECS runtime applies. Errors name the file and line.
func (c *rcCompiler) awsEcs(field string, e *config.AwsEcsConfig, rt *config.Runtime, data *Data) *ecsspec.Object {
	obj := &ecsspec.Object{Kind: ecsspec.Kind, Runtime: rt.Name, UpdateTaskDefinitionOnly: e.UpdateTaskDefinitionOnly, Adopt: e.Adopt}
	obj.ServiceName = c.in.Service.Name
	nameField := "service.name"
	if e.EcsServiceNameOverride != "" {
		nameField = field + ".ecsServiceNameOverride"
		name, ok := c.renderField(field+".ecsServiceNameOverride", e.EcsServiceNameOverride, data)
		if !ok {
			return nil
		}
		obj.ServiceName = strings.TrimSpace(name)
	}
	if !ecsNameRE.MatchString(obj.ServiceName) {
		c.fail(Error{Object: c.serviceObject(), Field: nameField, Msg: fmt.Sprintf("%q is not an ECS service name (1 to 255 letters, digits, - and _)", obj.ServiceName)})
		return nil
	}
	if e.TaskDefinition == nil {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".taskDefinition", Msg: "a task definition is required (inlined or local)"})
		return nil
	}
	task, ok := c.ecsDocument(field+".taskDefinition", e.TaskDefinition, data, func(b []byte) error {
		_, err := ecsspec.TaskDefinition(b)
		return err
	})
	obj.TaskDefinition = task
	switch {
	case e.ServiceDefinition != nil:
		svc, svcOK := c.ecsDocument(field+".serviceDefinition", e.ServiceDefinition, data, func(b []byte) error {
			in, err := ecsspec.Service(b)
			if err != nil {
				return err
			}
			if in.ServiceName != nil && *in.ServiceName != obj.ServiceName {
				return &ecsspec.Error{Msg: fmt.Sprintf("serviceName %q is not the ECS service's name %q (leave it out: drover sets it)", *in.ServiceName, obj.ServiceName)}
			}
			if in.TaskDefinition != nil {
				return &ecsspec.Error{Msg: "taskDefinition is set by drover (the task definition it registers); leave it out"}
			}
			return nil
		})
		ok = ok && svcOK
		obj.ServiceDefinition = svc
	case !e.UpdateTaskDefinitionOnly:
		c.fail(Error{Object: c.serviceObject(), Field: field + ".serviceDefinition", Msg: "a service definition is required to create the ECS service (or set updateTaskDefinitionOnly for one that exists)"})
		return nil
	}
	if !ok {
		return nil
	}
	return obj
}

// ecsDocument renders one ECS JSON document and checks it with check;
// it returns the document as canonical JSON.
func (c *rcCompiler) ecsDocument(field string, spec *config.EcsSpec, data *Data, check func([]byte) error) ([]byte, bool) {
	text, file, where := spec.Inlined, spec.File, field+".inlined"
	if spec.File != "" {
		where = field + ".local" // read from local.path
	}
	if spec.Tree != nil {
		sub, ok := c.renderField(field+".local.subPath", spec.Tree.SubPath, data)
		if !ok {
			return nil, false
		}
		sub = strings.Trim(path.Clean("/"+sub), "/")
		file = path.Join(spec.Tree.Root, sub)
		content, found := spec.Tree.Files[sub]
		if !found {
			c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: fmt.Sprintf("no file %s (subPath %q in release channel %s)", file, sub, c.rc.Name)})
			return nil, false
		}
		text, where = content, field+".local"
	}
	fail := func(line int, msg string) {
		e := Error{Object: c.serviceObject(), Field: where, Msg: msg}
		if file != "" {
			e.File, e.Line = file, line
		} else if line > 0 {
			e.Msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		c.fail(e)
	}
	rendered, err := c.templates.render(c.ctx, where, text, data)
	if err != nil {
		line, msg := templateError(err)
		fail(line, msg+keysHint(msg, data))
		return nil, false
	}
	var de *ecsspec.Error
	if err := check([]byte(rendered)); err != nil {
		if errors.As(err, &de) {
			fail(de.Line, "invalid ECS definition: "+de.Msg)
		} else {
			fail(0, err.Error())
		}
		return nil, false
	}
	out, err := ecsspec.Canonical([]byte(rendered))
	if err != nil {
		fail(0, err.Error())
		return nil, false
	}
	return out, true
}

// ecsNameRE is what ECS accepts as a service name.
var ecsNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
