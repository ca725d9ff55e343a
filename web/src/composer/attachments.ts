// Which attached paths can be shown as thumbnails: uploads (the thumbnail route serves only
// .burrow/attachments/) whose name says image; the server still checks the bytes.
const IMAGE_NAME = /\.(png|jpe?g|gif|webp)$/i;

export function isUploadedImage(path: string): boolean {
  return path.startsWith(".burrow/attachments/") && IMAGE_NAME.test(path);
}

/** The files of a paste or drop (a pasted screenshot has no name: it gets one). */
export function filesOf(data: DataTransfer | null): File[] {
  if (!data) return [];
  return Array.from(data.files).map((file) =>
    file.name ? file : new File([file], `pasted.${file.type.split("/")[1] ?? "bin"}`, { type: file.type }),
  );
}
