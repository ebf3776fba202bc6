# A module with no provider to download: terraform_data is built into
# Terraform (and OpenTofu). Its input depends on the service version drover
# passes (TF_VAR_pvn_service_version) and on external.txt, a file the test
# edits by hand to make drift. Replacing the resource runs the local-exec
# provisioners, which log every real apply to $APPLY_LOG and the environment
# to $ENV_DIR/<release channel>.env.
variable "pvn_service_version" {
  type = string
}

locals {
  external = trimspace(file("${path.module}/external.txt"))
}

resource "terraform_data" "deployment" {
  input            = { version = var.pvn_service_version, external = local.external }
  triggers_replace = [var.pvn_service_version, local.external]

  provisioner "local-exec" {
    command = "echo \"$PVN_RELEASE_CHANNEL ${self.input.version} ${self.input.external}\" >> \"$APPLY_LOG\""
  }
  # The environment terraform ran with, for the test to check.
  provisioner "local-exec" {
    command = "env > \"$ENV_DIR/$PVN_RELEASE_CHANNEL.env\""
  }
}

output "deployed" {
  value = terraform_data.deployment.output
}
