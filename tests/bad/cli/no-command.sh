# kiln alone
kiln
